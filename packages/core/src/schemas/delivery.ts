import { Type, type Static } from 'typebox';
import { Channel, DeliveryStatus } from './channel.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);
const DateTime = Type.String({ format: 'date-time', description: 'ISO 8601 with offset, microsecond precision' });

// The fields a delivery shares between the callback payload and the record, in the spec's order
// around `status` (which differs: a callback only ever reports a terminal state).
const identity = {
  delivery_id: Type.String(),
  reference: Nullable(Type.String()),
  channel: Channel,
  recipient: Type.String(),
};
const progress = {
  attempts: Type.Integer(),
  provider_message_id: Nullable(Type.String()),
  sent_at: Nullable(DateTime),
  delivered_at: Nullable(DateTime),
  read_at: Nullable(DateTime),
  last_error: Nullable(Type.String()),
};

/** The callback payload, field for field as the spec's table lists it. */
export const CallbackPayload = Type.Object({
  ...identity,
  status: Type.Union([Type.Literal('sent'), Type.Literal('failed')]),
  ...progress,
});
export type CallbackPayload = Static<typeof CallbackPayload>;

/** A row of GET /v2/deliveries: the callback fields plus the record's own. */
export const DeliveryRecord = Type.Object({
  ...identity,
  status: DeliveryStatus,
  ...progress,
  tenant: Type.String(),
  event_type: Type.String(),
  bounced_at: Nullable(Type.String({ format: 'date-time', description: 'email: when a bounce was reported after the send (the status stays sent); the suppression list holds the address' })),
  complained_at: Nullable(Type.String({ format: 'date-time', description: 'email: when the recipient reported it as spam (a feedback report); the suppression list holds the address' })),
  created_at: DateTime,
  updated_at: Type.String({
    format: 'date-time',
    description: 'Change-feed stamp: strictly increasing in feed order. Pass the last one seen as updated_since.',
  }),
});
export type DeliveryRecord = Static<typeof DeliveryRecord>;

export const DeliveryPage = Type.Object({
  results: Type.Array(DeliveryRecord),
  next_cursor: Nullable(Type.String()),
});
export type DeliveryPage = Static<typeof DeliveryPage>;

export const DeliveryQuery = Type.Object(
  {
    reference: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    tenant: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    channel: Type.Optional(Channel),
    status: Type.Optional(DeliveryStatus),
    updated_since: Type.Optional(
      Type.String({ description: 'ISO 8601 date-time with offset; exclusive: rows changed strictly after it.' }),
    ),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  },
  { additionalProperties: false },
);
export type DeliveryQuery = Static<typeof DeliveryQuery>;
