import { Type, type Static } from 'typebox';
import { Channel } from './channel.ts';
import { literalUnion } from './literal-union.ts';
import { TenantId } from './tenant.ts';

/**
 * Why an address is suppressed. soft_bounce entries expire; every other reason holds until removed.
 */
export const SUPPRESSION_REASONS = [
  'hard_bounce',
  'soft_bounce',
  'complaint',
  'opt_out',
  'invalid_recipient',
  'manual',
] as const;
export type SuppressionReasonT = (typeof SUPPRESSION_REASONS)[number];
export const SuppressionReason = literalUnion(SUPPRESSION_REASONS, {
  description: 'Why the address is suppressed',
});

/** Where an entry came from. */
export const SUPPRESSION_SOURCES = [
  'provider',
  'bounce_mail',
  'complaint_mail',
  'unsubscribe',
  'api',
  'console',
  'cli',
  'import',
] as const;
export type SuppressionSourceT = (typeof SUPPRESSION_SOURCES)[number];
export const SuppressionSource = literalUnion(SUPPRESSION_SOURCES, {
  description: 'Where the entry came from',
});

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) =>
  Type.Union([t, Type.Null()]);
const DateTime = Type.String({ format: 'date-time' });

/** `*` for every event type, or one event type (an unsubscribe from one kind of mail). */
export const SuppressionScope = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^[^\\s]+$',
  description: '`*` for every event type, or the one event type it covers',
});

export const Suppression = Type.Object({
  tenant: Type.String(),
  channel: Channel,
  address: Type.String({
    description:
      'Normalised: email case-folded with an IDNA ASCII domain; phone numbers E.164 with +',
  }),
  scope: Type.String({ description: '`*` for every event type, or the one event type it covers' }),
  reason: SuppressionReason,
  source: SuppressionSource,
  provider: Nullable(Type.String()),
  delivery_id: Nullable(
    Type.String({
      description: 'The delivery whose refusal, bounce, complaint or unsubscribe made the entry',
    }),
  ),
  detail: Nullable(
    Type.String({
      description:
        "The evidence: the provider's own words, a bounce's diagnostic, an operator's note",
    }),
  ),
  created_by: Nullable(
    Type.String({
      description: 'Who added it by hand (console user, `cli`), or the client for the API',
    }),
  ),
  created_at: DateTime,
  updated_at: DateTime,
  expires_at: Nullable(DateTime),
});
export type Suppression = Static<typeof Suppression>;

export const SuppressionPut = Type.Object(
  {
    reason: Type.Optional(SuppressionReason),
    scope: Type.Optional(SuppressionScope),
    detail: Type.Optional(Type.String({ maxLength: 1000 })),
    expires_at: Type.Optional(
      Type.String({
        format: 'date-time',
        description:
          'When the entry lapses; absent: never (soft_bounce: ENS_SOFT_BOUNCE_HOLD from now)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type SuppressionPut = Static<typeof SuppressionPut>;

export const SuppressionQuery = Type.Object(
  {
    channel: Type.Optional(Channel),
    reason: Type.Optional(SuppressionReason),
    address: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 254,
        description: 'Only this address (normalised before matching)',
      }),
    ),
    cursor: Type.Optional(
      Type.String({ maxLength: 1000, description: 'next_cursor of the previous page' }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  },
  { additionalProperties: false },
);
export type SuppressionQuery = Static<typeof SuppressionQuery>;

/**
 * The path of one address's entries: the address URL-encoded, normalised as its channel's addresses
 * are.
 */
export const SuppressionAddressParams = Type.Object({
  tenant: TenantId,
  channel: Channel,
  address: Type.String({
    minLength: 1,
    maxLength: 254,
    description:
      'The address, URL-encoded (`+` as `%2B`, `@` as `%40`); normalised before matching ' +
      '(email case-folded with an IDNA ASCII domain, phone numbers to E.164)',
  }),
});
export type SuppressionAddressParams = Static<typeof SuppressionAddressParams>;

/** DELETE's query: one scope, or every entry of the address when absent. */
export const SuppressionDeleteQuery = Type.Object(
  { scope: Type.Optional(SuppressionScope) },
  { additionalProperties: false },
);
export type SuppressionDeleteQuery = Static<typeof SuppressionDeleteQuery>;

/** Every entry of one address in a tenant: one per scope. */
export const SuppressionEntries = Type.Object({
  results: Type.Array(Suppression, { minItems: 1 }),
});
export type SuppressionEntries = Static<typeof SuppressionEntries>;

export const SuppressionPage = Type.Object({
  results: Type.Array(Suppression),
  next_cursor: Nullable(Type.String()),
});
export type SuppressionPage = Static<typeof SuppressionPage>;

/** A client's consent policy, set by the operator. */
export const ConsentPolicy = Type.Object({
  suppression_reasons: Type.Array(SuppressionReason, {
    description: 'Reasons that stop a send (all by default)',
  }),
  bulk_event_types: Type.Array(Type.String(), {
    description:
      'Event types sent with one-click unsubscribe headers; an unsubscribe covers its own ' +
      'event type',
  }),
  must_deliver_event_types: Type.Array(Type.String(), {
    description:
      'Event types an email or push opt-out or complaint does not stop (a password reset); an ' +
      'sms or whatsapp STOP stops everything',
  }),
});
export type ConsentPolicy = Static<typeof ConsentPolicy>;
