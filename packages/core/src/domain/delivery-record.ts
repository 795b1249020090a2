import { Type, type TSchema } from 'typebox';
import { isoSql } from '../db/pool.ts';
import { Channel, DeliveryStatus } from '../schemas/channel.ts';

/*
 * The delivery record, named once: each field a caller sees, its wire type and the column that
 * holds it. The API's record (schemas/delivery.ts), the callback payload (the same file, and its
 * serialiser), the feed's page (store/feed.ts), the rows the store's transitions return to build a
 * callback (store/deliveries.ts) and the console's read models (store/read-models/) all read this
 * table. Adding a column to the record is a migration plus one entry here; the callback payload
 * gains it only if the interface puts it in CALLBACK_FIELDS, which it fixes field for field.
 */

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const DateTime = Type.String({
  format: 'date-time',
  description: 'ISO 8601 with offset, microsecond precision',
});

/** A field of the record: its wire schema, its column, and whether it is sent as ISO text. */
interface RecordField<S extends TSchema = TSchema> {
  readonly schema: S;
  /** The column of `deliveries` when it is not the field's name. */
  readonly column?: string;
  readonly timestamp?: true;
}

const field = <S extends TSchema>(schema: S, more: Omit<RecordField, 'schema'> = {}) => ({
  schema,
  ...more,
});
const timestamp = <S extends TSchema>(schema: S) => field(schema, { timestamp: true });

/** The record's fields in the interface's order (GET /v2/deliveries' rows list them so). */
export const RECORD_FIELDS = {
  delivery_id: field(Type.String(), { column: 'id' }),
  reference: field(Nullable(Type.String())),
  channel: field(Channel),
  recipient: field(Type.String()),
  status: field(DeliveryStatus),
  attempts: field(Type.Integer()),
  provider_message_id: field(Nullable(Type.String())),
  sent_at: timestamp(Nullable(DateTime)),
  delivered_at: timestamp(Nullable(DateTime)),
  read_at: timestamp(Nullable(DateTime)),
  last_error: field(Nullable(Type.String())),
  tenant: field(Type.String()),
  event_type: field(Type.String()),
  bounced_at: timestamp(
    Nullable(
      Type.String({
        format: 'date-time',
        description:
          'email: when a bounce was reported after the send (the status stays sent); the ' +
          'suppression list holds the address',
      }),
    ),
  ),
  complained_at: timestamp(
    Nullable(
      Type.String({
        format: 'date-time',
        description:
          'email: when the recipient reported it as spam (a feedback report); the suppression ' +
          'list holds the address',
      }),
    ),
  ),
  created_at: timestamp(DateTime),
  updated_at: timestamp(
    Type.String({
      format: 'date-time',
      description:
        'Change-feed stamp: strictly increasing in feed order. Pass the last one seen as ' +
        'updated_since.',
    }),
  ),
} as const satisfies Record<string, RecordField>;

export type RecordFieldName = keyof typeof RECORD_FIELDS;
type Fields = typeof RECORD_FIELDS;

/** The callback payload's fields, in its order: the interface fixes them, field for field. */
export const CALLBACK_FIELDS = [
  'delivery_id',
  'reference',
  'channel',
  'recipient',
  'status',
  'attempts',
  'provider_message_id',
  'sent_at',
  'delivered_at',
  'read_at',
  'last_error',
] as const satisfies readonly RecordFieldName[];

export type CallbackFieldName = (typeof CALLBACK_FIELDS)[number];

/** The wire schemas of `names`, in that order, for Type.Object. */
export function recordSchemas<const N extends readonly RecordFieldName[]>(
  names: N,
): { [K in N[number]]: Fields[K]['schema'] } {
  return Object.fromEntries(names.map((n) => [n, RECORD_FIELDS[n].schema])) as {
    [K in N[number]]: Fields[K]['schema'];
  };
}

/** Every field's name, in the record's order. */
export const RECORD_FIELD_NAMES = Object.keys(RECORD_FIELDS) as RecordFieldName[];

/**
 * The SELECT (or RETURNING) list that reads `names` from the deliveries row aliased `alias`, each
 * under its field's name: timestamps as the interface's ISO text (isoSql), the rest as stored.
 * `rename` gives some fields another output name (the console's lists call the id `id`).
 */
export function recordColumns(
  alias: string,
  names: readonly RecordFieldName[] = RECORD_FIELD_NAMES,
  rename: Partial<Record<RecordFieldName, string>> = {},
): string {
  return names
    .map((n) => {
      const f: RecordField = RECORD_FIELDS[n];
      const column = `${alias}.${f.column ?? n}`;
      const out = rename[n] ?? n;
      if (f.timestamp) return `${isoSql(column)} AS ${out}`;
      return `${column}${out === (f.column ?? n) ? '' : ` AS ${out}`}`;
    })
    .join(', ');
}

/** `row`'s fields named by `names`, in that order (a row read with recordColumns, or a payload). */
export function pickFields<const N extends readonly string[], R extends Record<N[number], unknown>>(
  row: R,
  names: N,
): { [K in N[number]]: R[K] } {
  return Object.fromEntries(names.map((n) => [n, row[n as N[number]]])) as {
    [K in N[number]]: R[K];
  };
}
