import { Type } from 'typebox';

export const DEFAULT_BASE_URL = 'https://api.twilio.com';
export const DEFAULT_TIMEOUT_MS = 10_000;

/** The plugin's configuration after the schema's defaults are filled in. */
export interface TwilioConfig {
  accountSid: string;
  authToken: string;
  apiKeySid?: string;
  apiKeySecret?: string;
  from?: string;
  messagingServiceSid?: string;
  statusCallbackUrl?: string;
  inboundUrl?: string;
  helpText?: string;
  baseUrl?: string;
  timeoutMs?: number;
}

export const configSchema = Type.Object(
  {
    accountSid: Type.String({
      pattern: '^AC[0-9a-fA-F]{32}$',
      description:
        'The Account SID (AC…). It is the account in every API path, also when authenticating ' +
        'with an API key.',
    }),
    authToken: Type.String({
      minLength: 1,
      description:
        "The account's Auth Token. Signs status callbacks, so it is needed even when an API " +
        'key authenticates the sends. Secret.',
    }),
    apiKeySid: Type.Optional(
      Type.String({
        pattern: '^SK[0-9a-fA-F]{32}$',
        description:
          'An API key SID (SK…) to authenticate API requests with instead of the Auth Token; ' +
          'set together with apiKeySecret.',
      }),
    ),
    apiKeySecret: Type.Optional(
      Type.String({ minLength: 1, description: 'The secret of apiKeySid. Secret.' }),
    ),
    from: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'The default sender: a Twilio number in E.164 or an alphanumeric sender id. A ' +
          "tenant's sender_id setting overrides it.",
      }),
    ),
    messagingServiceSid: Type.Optional(
      Type.String({
        pattern: '^MG[0-9a-fA-F]{32}$',
        description:
          'A Messaging Service SID (MG…) that picks the sender from its pool; used instead of ' +
          '`from` unless the tenant sets sender_id.',
      }),
    ),
    statusCallbackUrl: Type.Optional(
      Type.String({
        format: 'uri',
        pattern: '^https?://',
        description:
          "The public URL of ENS's status route, e.g. " +
          "https://ens.example.com/webhooks/twilio/status. Sent as each message's " +
          'StatusCallback and used to check X-Twilio-Signature.',
      }),
    ),
    inboundUrl: Type.Optional(
      Type.String({
        format: 'uri',
        pattern: '^https?://',
        description:
          "The public URL of ENS's inbound route, e.g. " +
          "https://ens.example.com/webhooks/twilio/inbound, set as the numbers' (or Messaging " +
          "Service's) incoming-message webhook. Used to check X-Twilio-Signature; STOP and " +
          'START texted to the numbers become opt-outs and opt-ins.',
      }),
    ),
    helpText: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1600,
        description:
          'The reply to a HELP or INFO text. Without it ENS does not reply (Twilio answers ' +
          'HELP itself when Advanced Opt-Out is on).',
      }),
    ),
    baseUrl: Type.Optional(
      Type.String({
        format: 'uri',
        pattern: '^https?://',
        default: DEFAULT_BASE_URL,
        description: 'The REST API origin; change it only for a regional edge or a test server.',
      }),
    ),
    timeoutMs: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 120_000,
        default: DEFAULT_TIMEOUT_MS,
        description:
          'How long one API request may take before it counts as a transient failure, in ms.',
      }),
    ),
  },
  {
    additionalProperties: false,
    // A send needs a sender: a From number or a Messaging Service that picks one.
    anyOf: [{ required: ['from'] }, { required: ['messagingServiceSid'] }],
    // Half an API key would silently fall back to the Auth Token; refuse it instead.
    dependentRequired: { apiKeySid: ['apiKeySecret'], apiKeySecret: ['apiKeySid'] },
  },
);
