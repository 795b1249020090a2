import { Type, type Static } from 'typebox';

export const GOOGLE_TOKEN_URI = 'https://oauth2.googleapis.com/token';
export const FCM_BASE_URL = 'https://fcm.googleapis.com';

/**
 * A Google service-account key file, as downloaded from the Firebase console ("Generate new
 * private key"). Unlike the plugin's own settings, this object admits fields it does not list:
 * operators paste Google's file whole, and a field Google adds to that file later must not stop
 * ENS from starting.
 */
export const ServiceAccountSchema = Type.Object(
  {
    type: Type.Literal('service_account', {
      description: 'Always "service_account" in a service-account key file.',
    }),
    project_id: Type.String({
      minLength: 1,
      description:
        'The Firebase (Google Cloud) project id; messages are sent to projects/<project_id>.',
    }),
    private_key_id: Type.String({
      minLength: 1,
      description:
        'Id of the key; sent as the JWT header kid so Google picks the right public key.',
    }),
    private_key: Type.String({
      minLength: 1,
      description: 'PEM private key (RSA) that signs the OAuth assertion. Secret.',
    }),
    client_email: Type.String({
      minLength: 3,
      description: 'The service account e-mail; the assertion issuer.',
    }),
    token_uri: Type.Optional(
      Type.String({
        format: 'uri',
        description: `The OAuth 2.0 token endpoint and assertion audience; ${GOOGLE_TOKEN_URI} when absent.`,
      }),
    ),
  },
  { additionalProperties: true, description: 'A service-account key file (JSON object).' },
);
export type ServiceAccount = Static<typeof ServiceAccountSchema>;

const ServiceAccountOrJson = Type.Union(
  [
    ServiceAccountSchema,
    Type.String({ minLength: 2, description: 'The service-account key file as a JSON string.' }),
  ],
  { description: 'A service-account key file, as an object or as its JSON text.' },
);

export const ConfigSchema = Type.Object(
  {
    serviceAccount: Type.Optional(ServiceAccountOrJson),
    apps: Type.Optional(
      Type.Record(Type.String({ minLength: 1 }), ServiceAccountOrJson, {
        description:
          'Several Firebase projects by app name; the tenant setting push_app picks one. Use ' +
          'instead of serviceAccount.',
      }),
    ),
    defaultApp: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'With apps: the app used when the tenant sets no push_app. Required when apps holds ' +
          'more than one app.',
      }),
    ),
    projectId: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'With serviceAccount: the project to send through, when it is not the service ' +
          "account's own project_id.",
      }),
    ),
    baseUrl: Type.String({
      format: 'uri',
      default: FCM_BASE_URL,
      description: 'The FCM HTTP v1 API root.',
    }),
    timeoutMs: Type.Integer({
      minimum: 1,
      maximum: 120_000,
      default: 10_000,
      description: 'Time limit of each HTTP request to Google (token exchange and send), in ms.',
    }),
  },
  { additionalProperties: false }, // a misspelt setting must stop the start, not be ignored
);

export interface FcmConfig {
  serviceAccount?: ServiceAccount | string;
  apps?: Record<string, ServiceAccount | string>;
  defaultApp?: string;
  projectId?: string;
  baseUrl?: string;
  timeoutMs?: number;
}
