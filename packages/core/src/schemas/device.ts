import { PUSH_PLATFORMS } from '@ens/plugin-sdk';
import { Type, type Static } from 'typebox';
import { literalUnion } from './literal-union.ts';

export const PushPlatform = literalUnion(PUSH_PLATFORMS, {
  description:
    'fcm: a Firebase registration token; apns: an APNs device token (hex); webpush: a browser ' +
    'PushSubscription given in `subscription`',
});

export const UserId = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^[^/\\s]+$',
  description: "The caller's own user id: the push recipient",
});
/** FCM tokens run to about 200 characters and APNs tokens to 64 hex digits; 4096 leaves room. */
export const DeviceToken = Type.String({ minLength: 1, maxLength: 4096, pattern: '^[^/\\s]+$' });

const Base64Url = (what: string, min: number, max: number) =>
  Type.String({
    minLength: min,
    maxLength: max,
    pattern: '^[A-Za-z0-9_-]+={0,2}$',
    description: what,
  });

export const WebPushSubscription = Type.Object(
  {
    endpoint: Type.String({
      format: 'uri',
      pattern: '^https?://',
      maxLength: 2048,
      description: "The push service URL the browser's subscription gives",
    }),
    keys: Type.Object(
      {
        p256dh: Base64Url("The subscription's P-256 public key, base64url", 80, 100),
        auth: Base64Url("The subscription's auth secret, base64url", 16, 32),
      },
      { additionalProperties: false },
    ),
    expirationTime: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
  },
  { additionalProperties: false },
);

export const DevicePut = Type.Object(
  {
    platform: Type.Optional(PushPlatform),
    subscription: Type.Optional(WebPushSubscription),
  },
  {
    additionalProperties: false,
    description: 'Without a body the token is registered as an fcm device.',
  },
);
export type DevicePut = Static<typeof DevicePut>;

export const Device = Type.Object({
  token: Type.String(),
  platform: PushPlatform,
  subscription: Type.Union([WebPushSubscription, Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});
export type Device = Static<typeof Device>;

export const DeviceList = Type.Object({ results: Type.Array(Device) });
