import { Type } from 'typebox';

/**
 * web-push's generateVAPIDKeys(): a 65-octet uncompressed P-256 point, URL-safe base64 without
 * padding.
 */
const PUBLIC_KEY = '^[A-Za-z0-9_-]{87}$';
/** …and the 32-octet private scalar. */
const PRIVATE_KEY = '^[A-Za-z0-9_-]{43}$';

const identityFields = {
  vapidSubject: Type.String({
    pattern: '^(mailto:[^\\s]+|https://[^\\s]+)$',
    description:
      'VAPID contact (RFC 8292 §2.1): a mailto: address or https: URL the push service ' +
      'operator can reach you at',
  }),
  vapidPublicKey: Type.String({
    pattern: PUBLIC_KEY,
    description:
      'VAPID public key, URL-safe base64 (as web-push generate-vapid-keys prints); browsers ' +
      'subscribe with it as applicationServerKey',
  }),
  vapidPrivateKey: Type.String({
    pattern: PRIVATE_KEY,
    description: 'VAPID private key, URL-safe base64; secret, never logged',
  }),
};

export const VapidIdentity = Type.Object(identityFields, {
  additionalProperties: false,
  description: 'One VAPID identity (application server key pair)',
});

export const ConfigSchema = Type.Object(
  {
    ...identityFields,
    apps: Type.Optional(
      Type.Record(Type.String({ minLength: 1 }), VapidIdentity, {
        description:
          'Further VAPID identities by name; a tenant whose setting push_app names one sends ' +
          'with it. Subscriptions are bound to the key they were made with',
      }),
    ),
    ttlSeconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 2_419_200,
        default: 86_400,
        description:
          'TTL header (RFC 8030 §5.2): how long the push service keeps an undelivered message, ' +
          'in seconds',
      }),
    ),
    urgency: Type.Optional(
      Type.Union(
        [
          Type.Literal('very-low'),
          Type.Literal('low'),
          Type.Literal('normal'),
          Type.Literal('high'),
        ],
        {
          default: 'normal',
          description: 'Urgency header (RFC 8030 §5.3): very-low, low, normal or high',
        },
      ),
    ),
    contentEncoding: Type.Optional(
      Type.Literal('aes128gcm', {
        default: 'aes128gcm',
        description: 'Payload encryption: aes128gcm (RFC 8291), the only one supported',
      }),
    ),
    timeoutMs: Type.Optional(
      Type.Integer({
        minimum: 100,
        maximum: 120_000,
        default: 10_000,
        description: 'Time allowed for the push service to answer, in ms',
      }),
    ),
    allowHttpEndpoints: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'Accept subscriptions whose endpoint is plain http: (a local test push service). ' +
          'Browsers only hand out https: endpoints',
      }),
    ),
  },
  { additionalProperties: false },
);

export interface Identity {
  vapidSubject: string;
  vapidPublicKey: string;
  vapidPrivateKey: string;
}

export interface WebPushConfig extends Identity {
  apps?: Record<string, Identity>;
  ttlSeconds?: number;
  urgency?: 'very-low' | 'low' | 'normal' | 'high';
  contentEncoding?: 'aes128gcm';
  timeoutMs?: number;
  allowHttpEndpoints?: boolean;
}
