import { Type } from 'typebox';

/** The plugin's settings, as ENS_PROVIDER_CONFIG gives them (defaults filled in by the schema). */
export interface WhatsAppConfig {
  accessToken: string;
  phoneNumberId: string;
  appSecret: string;
  verifyToken: string;
  graphUrl?: string;
  apiVersion?: string;
  timeoutMs?: number;
}

export const DEFAULT_GRAPH_URL = 'https://graph.facebook.com';
/** The Graph API version Meta's current Cloud API reference pages use in their examples. */
export const DEFAULT_API_VERSION = 'v23.0';
export const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Phone number ids are Graph object ids: digits only. Checked because the id goes into the URL
 * path.
 */
export const PHONE_NUMBER_ID = /^[0-9]{1,32}$/;

export const configSchema = Type.Object(
  {
    accessToken: Type.String({
      minLength: 1,
      description:
        'Cloud API access token (a system user token with whatsapp_business_messaging); sent ' +
        'as Authorization: Bearer.',
    }),
    phoneNumberId: Type.String({
      pattern: PHONE_NUMBER_ID.source,
      description:
        'Default sender: the Cloud API phone number id (not the phone number). The tenant ' +
        'setting whatsapp_phone_number_id overrides it.',
    }),
    appSecret: Type.String({
      minLength: 1,
      description:
        "The Meta app's App Secret; webhook posts are verified against X-Hub-Signature-256, an " +
        'HMAC-SHA256 keyed with it.',
    }),
    verifyToken: Type.String({
      minLength: 1,
      description:
        "The Verify Token entered in the app dashboard's webhook setup; the GET subscription " +
        'challenge is answered only when it matches.',
    }),
    graphUrl: Type.Optional(
      Type.String({
        format: 'uri',
        pattern: '^https?://',
        default: DEFAULT_GRAPH_URL,
        description: 'Base URL of the Graph API, without the version.',
      }),
    ),
    apiVersion: Type.Optional(
      Type.String({
        pattern: '^v[0-9]+\\.[0-9]+$',
        default: DEFAULT_API_VERSION,
        description: 'Graph API version path segment, e.g. v23.0.',
      }),
    ),
    timeoutMs: Type.Optional(
      Type.Integer({
        minimum: 100,
        maximum: 120_000,
        default: DEFAULT_TIMEOUT_MS,
        description:
          'How long to wait for the Graph API before a send counts as a (transient) failure.',
      }),
    ),
  },
  // A misspelt setting must stop the start, not be silently ignored.
  { additionalProperties: false },
);
