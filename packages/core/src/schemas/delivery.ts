import { Type, type Static } from 'typebox';
import { Channel, DeliveryStatus } from './channel.ts';
import { CALLBACK_FIELDS, recordSchemas, RECORD_FIELD_NAMES } from '../domain/delivery-record.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) =>
  Type.Union([t, Type.Null()]);

/** The callback payload, field for field as the spec's table lists it (a terminal state only). */
export const CallbackPayload = Type.Object({
  ...recordSchemas(CALLBACK_FIELDS),
  status: Type.Union([Type.Literal('sent'), Type.Literal('failed')]),
});
export type CallbackPayload = Static<typeof CallbackPayload>;

/** A row of GET /v2/deliveries: every field of the record (domain/delivery-record.ts). */
export const DeliveryRecord = Type.Object(recordSchemas(RECORD_FIELD_NAMES));
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
      Type.String({
        description: 'ISO 8601 date-time with offset; exclusive: rows changed strictly after it.',
      }),
    ),
    cursor: Type.Optional(
      Type.String({ maxLength: 200, description: 'next_cursor of the previous page' }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  },
  { additionalProperties: false },
);
export type DeliveryQuery = Static<typeof DeliveryQuery>;
