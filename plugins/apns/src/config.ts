import { Type, type Static } from 'typebox';

/**
 * Apple's two gateways; a device token only works in the environment its app build registered in.
 */
export const APNS_ORIGINS = {
  production: 'https://api.push.apple.com',
  sandbox: 'https://api.sandbox.push.apple.com',
} as const;

/** Apple issues Team IDs and Key IDs as 10 upper-case letters and digits. */
const AppleId = (what: string) => Type.String({ pattern: '^[A-Z0-9]{10}$', description: what });

const Topic = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^[A-Za-z0-9.\\-_]+$',
  description: "The app's bundle id, sent as apns-topic (e.g. com.example.app)",
});

export const ApnsConfig = Type.Object(
  {
    teamId: AppleId(
      'Your Apple Developer Team ID (10 characters); the iss claim of the provider token',
    ),
    keyId: AppleId(
      'The Key ID of the APNs authentication key (10 characters); the kid header of the ' +
        'provider token',
    ),
    privateKey: Type.String({
      pattern: '-----BEGIN PRIVATE KEY-----',
      description:
        'The contents of the AuthKey_<keyId>.p8 file (a PKCS#8 P-256 private key in PEM). Secret.',
    }),
    topic: Topic,
    apps: Type.Optional(
      Type.Record(
        Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$' }),
        Type.Object({ topic: Topic }, { additionalProperties: false }),
        {
          description:
            'Further apps signed by the same key, by name; a tenant picks one with the tenant ' +
            'setting push_app',
        },
      ),
    ),
    environment: Type.Optional(
      Type.Union([Type.Literal('production'), Type.Literal('sandbox')], {
        default: 'production',
        description:
          'production (api.push.apple.com) for App Store/TestFlight builds, sandbox ' +
          '(api.sandbox.push.apple.com) for development builds',
      }),
    ),
    baseUrl: Type.Optional(
      Type.String({
        pattern: '^https://[^/?#\\s]+/?$',
        description:
          'An https origin that replaces the environment gateway (a test server or a proxy ' +
          'that speaks HTTP/2)',
      }),
    ),
    ca: Type.Optional(
      Type.String({
        pattern: '-----BEGIN CERTIFICATE-----',
        description:
          "Extra PEM certificate(s) to trust besides Node's root store (private roots, the " +
          'test server)',
      }),
    ),
    timeoutMs: Type.Optional(
      Type.Integer({
        minimum: 100,
        maximum: 120_000,
        default: 10_000,
        description: 'How long one request may take before it counts as a transient failure',
      }),
    ),
    pushType: Type.Optional(
      Type.Union([Type.Literal('alert'), Type.Literal('background')], {
        default: 'alert',
        description:
          'apns-push-type: alert shows subject/body; background is a silent push that wakes ' +
          'the app with content.data only',
      }),
    ),
    priority: Type.Optional(
      Type.Union([Type.Literal(10), Type.Literal(5), Type.Literal(1)], {
        description:
          'apns-priority: 10 immediate, 5 power-considerate, 1 lowest. Default 10 for alert, 5 ' +
          'for background (Apple requires it)',
      }),
    ),
    expiration: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 30 * 24 * 3600,
        default: 86_400,
        description:
          'Seconds APNs keeps trying an offline device (sent as the apns-expiration epoch); 0 ' +
          '= deliver once, never stored',
      }),
    ),
    sound: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description:
          'aps.sound for alert pushes, e.g. "default"; omitted when unset (silent alert)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ApnsConfig = Static<typeof ApnsConfig>;

export function originOf(config: ApnsConfig): string {
  if (config.baseUrl) return config.baseUrl.replace(/\/$/, '');
  return APNS_ORIGINS[config.environment ?? 'production'];
}
