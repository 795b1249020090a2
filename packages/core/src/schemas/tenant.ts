import { Type, type Static } from 'typebox';

export const TenantId = Type.String({ minLength: 1, maxLength: 200, pattern: '^[^/\\s]+$' });

export const TenantCreate = Type.Object(
  {
    tenant: TenantId,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    settings: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'Per-tenant provider settings' })),
  },
  { additionalProperties: false },
);
export type TenantCreate = Static<typeof TenantCreate>;

export const TenantPatch = Type.Object(
  {
    name: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()])),
    settings: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
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
