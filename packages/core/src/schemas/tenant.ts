import { Type, type Static } from 'typebox';

export const TenantId = Type.String({ minLength: 1, maxLength: 200, pattern: '^[^/\\s]+$' });

/**
 * The per-tenant provider settings. The named keys are the ones the bundled plugins read, checked
 * here so that a malformed one is a 400 at the API rather than a failed send later; other keys
 * are kept as given for third-party plugins.
 */
export const TenantSettings = Type.Object(
  {
    sender_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 20,
        pattern: '^(\\+?[0-9]{3,15}|[A-Za-z0-9 ._&-]{1,11})$',
        description:
          'sms: the sender number (digits) or alphanumeric sender id (up to 11 characters)',
      }),
    ),
    from_address: Type.Optional(
      Type.String({ format: 'email', maxLength: 254, description: 'email: the From address' }),
    ),
    from_name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        pattern: '^[^\\r\\n]*$',
        description: 'email: the From display name',
      }),
    ),
    whatsapp_phone_number_id: Type.Optional(
      Type.String({
        pattern: '^[0-9]{5,20}$',
        description: 'whatsapp: the Cloud API phone number id to send from',
      }),
    ),
    push_app: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: "push: which of the push plugins' configured apps to use",
      }),
    ),
  },
  {
    additionalProperties: true,
    maxProperties: 64,
    description:
      'Per-tenant provider settings; each overrides the provider default of the same meaning. ' +
      'At most 64 keys and 16 KiB as JSON.',
  },
);

export const TenantCreate = Type.Object(
  {
    tenant: TenantId,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    settings: Type.Optional(TenantSettings),
  },
  { additionalProperties: false },
);
export type TenantCreate = Static<typeof TenantCreate>;

export const TenantPatch = Type.Object(
  {
    name: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()])),
    settings: Type.Optional(TenantSettings),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type TenantPatch = Static<typeof TenantPatch>;

export const Tenant = Type.Object({
  tenant: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  settings: Type.Record(Type.String(), Type.Unknown()),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});
export type Tenant = Static<typeof Tenant>;
