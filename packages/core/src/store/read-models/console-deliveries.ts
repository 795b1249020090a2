import { EnsError } from '@ens/plugin-sdk';
import { inTransaction, isoSql, type Db } from '../../db/pool.ts';
import { attemptInFlightSql } from '../attempt-rows.ts';
import { callbackUrlSql, callbacksOfSql } from '../callbacks.ts';
import {
  RECORD_FIELD_NAMES,
  recordColumns,
  type RecordFieldName,
} from '../../domain/delivery-record.ts';

/*
 * The console's read models of deliveries: its search (a list of record rows) and one delivery's
 * page (the whole record, with what only staff see: the handoff, the provider, the due time, the
 * attempts, reports and callbacks). The record's fields are read with the record's own columns
 * (domain/delivery-record.ts); the console calls a delivery's id `id`.
 */

const AS_ID = { delivery_id: 'id' } as const;

const LIST_FIELDS = [
  'delivery_id',
  'created_at',
  'tenant',
  'event_type',
  'reference',
  'channel',
  'recipient',
  'status',
  'attempts',
  'last_error',
] as const satisfies readonly RecordFieldName[];

const SIBLING_FIELDS = [
  'delivery_id',
  'channel',
  'recipient',
  'status',
  'attempts',
  'last_error',
] as const satisfies readonly RecordFieldName[];

export interface DeliveryFilters {
  reference?: string;
  recipient?: string;
  tenant?: string;
  client?: string;
  channel?: string;
  status?: string;
  event_type?: string;
  /** ISO timestamps (already validated). */
  since?: string;
  until?: string;
  /** The last id of the previous page. */
  after?: string;
}

export interface DeliveryListRow {
  id: string;
  created_at: string;
  client_id: string;
  tenant: string;
  event_type: string;
  reference: string | null;
  channel: string;
  recipient: string;
  status: string;
  attempts: number;
  last_error: string | null;
}

export const PAGE_SIZE = 50;

/** How long one search may run before the page asks for a narrower one. */
const SEARCH_TIMEOUT_MS = 5000;

/** A console search that PostgreSQL cancelled at its statement timeout. */
export class SearchTooSlow extends EnsError {
  static override readonly code: string = 'ENS_ERR_OPS_SEARCH_TOO_SLOW';
}

/**
 * Newest first, 50 at a time, keyset-paged on the primary key: ids are UUIDv7, so id order is
 * creation order, and since/until become a range of the primary key (ens_uuid7_floor) that
 * PostgreSQL walks backwards until it has a page.
 */
export async function searchDeliveries(
  db: Db,
  f: DeliveryFilters,
): Promise<{ rows: DeliveryListRow[]; next: string | null; total: SearchTotal | null }> {
  const where: string[] = [];
  const values: unknown[] = [];
  const add = (sql: (p: string) => string, v: unknown) => {
    values.push(v);
    where.push(sql(`$${values.length}`));
  };
  if (f.reference) add((p) => `reference = ${p}`, f.reference);
  if (f.recipient) add((p) => `recipient = ${p}`, f.recipient);
  if (f.tenant) add((p) => `tenant = ${p}`, f.tenant);
  if (f.client) add((p) => `client_id = ${p}`, f.client);
  if (f.channel) add((p) => `channel = ${p}`, f.channel);
  if (f.status) add((p) => `status = ${p}`, f.status);
  if (f.event_type) add((p) => `event_type = ${p}`, f.event_type);
  if (f.since)
    add(
      (p) =>
        `deliveries.id >= ens_uuid7_floor(${p}::timestamptz) AND deliveries.created_at >= ${p}::timestamptz`,
      f.since,
    );
  if (f.until)
    add(
      (p) =>
        `deliveries.id < ens_uuid7_floor(${p}::timestamptz + interval '1 millisecond') AND deliveries.created_at < ${p}::timestamptz`,
      f.until,
    );
  const filters = { where: [...where], values: [...values] };
  if (f.after) add((p) => `deliveries.id < ${p}::uuid`, f.after);
  values.push(PAGE_SIZE + 1);
  const sql = `SELECT ${recordColumns('deliveries', LIST_FIELDS, AS_ID)}, deliveries.client_id
                 FROM deliveries ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
                ORDER BY deliveries.id DESC LIMIT $${values.length}`;
  try {
    const rows = await inTransaction(db, async (c) => {
      await c.query(`SET LOCAL statement_timeout = ${SEARCH_TIMEOUT_MS}`);
      return (await c.query<DeliveryListRow>(sql, values)).rows;
    });
    const next = rows.length > PAGE_SIZE ? rows[PAGE_SIZE - 1]!.id : null;
    return { rows: rows.slice(0, PAGE_SIZE), next, total: await countMatches(db, filters) };
  } catch (e) {
    if ((e as { code?: string }).code === '57014')
      throw new SearchTooSlow('search timed out', { cause: e });
    throw e;
  }
}

/** How many deliveries a search matches: counted up to a bound, `atLeast` past it. */
export interface SearchTotal {
  n: number;
  atLeast: boolean;
}

/** Past this many matches a search says "more than"; counting further costs a scan. */
const COUNT_BOUND = 10_000;
const COUNT_TIMEOUT_MS = 1000;

/** The search's total (whatever page is shown), or null when counting takes too long. */
async function countMatches(
  db: Db,
  f: { where: string[]; values: unknown[] },
): Promise<SearchTotal | null> {
  const sql = `SELECT count(*)::int AS n FROM (SELECT 1 FROM deliveries
    ${f.where.length ? `WHERE ${f.where.join(' AND ')}` : ''} LIMIT $${f.values.length + 1}) x`;
  try {
    const n = await inTransaction(db, async (c) => {
      await c.query(`SET LOCAL statement_timeout = ${COUNT_TIMEOUT_MS}`);
      return (await c.query<{ n: number }>(sql, [...f.values, COUNT_BOUND + 1])).rows[0]!.n;
    });
    return n > COUNT_BOUND ? { n: COUNT_BOUND, atLeast: true } : { n, atLeast: false };
  } catch (e) {
    if ((e as { code?: string }).code === '57014') return null;
    throw e;
  }
}

export interface SiblingRow {
  id: string;
  channel: string;
  recipient: string;
  status: string;
  attempts: number;
  last_error: string | null;
}

export interface DeliveryDetail {
  delivery: Record<string, unknown>;
  /** The stored content of the delivery's channel (inline images as storage keys). */
  content: Record<string, unknown> | null;
  /** The other deliveries of its handoff, in id order (at most SIBLINGS_SHOWN). */
  siblings: SiblingRow[];
  siblingsMore: boolean;
  /** How many other deliveries the handoff has, counted up to COUNT_BOUND. */
  siblingsTotal: SearchTotal;
  attempts: Record<string, unknown>[];
  events: Record<string, unknown>[];
  callbacks: (Record<string, unknown> & { attempts_list: Record<string, unknown>[] })[];
}

export const SIBLINGS_SHOWN = 100;

/**
 * How long after its handoff id a handoff's delivery ids can be made: they are made in one loop,
 * right after it.
 */
const HANDOFF_ID_SPAN_MS = 10_000;

/**
 * The first UUIDv7 past a handoff's deliveries. The accept path makes the handoff id and then its
 * delivery ids in one synchronous loop in one process, and UUIDv7s from one process only grow, so
 * a handoff's deliveries lie between its id and this one: a short range of the primary key.
 * (deliveries has no index on handoff_id, and one would cost every accept a write.)
 */
export function handoffIdsEnd(handoffId: string): string {
  const ms = parseInt(handoffId.replace(/-/g, '').slice(0, 12), 16) + HANDOFF_ID_SPAN_MS;
  const h = ms.toString(16).padStart(12, '0');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-0000-0000-000000000000`;
}

const SIBLINGS_WHERE =
  'deliveries.id > $1::uuid AND deliveries.id < $3::uuid AND handoff_id = $1::uuid AND deliveries.id <> $2::uuid';
const SIBLINGS_SQL = `
SELECT ${recordColumns('deliveries', SIBLING_FIELDS, AS_ID)} FROM deliveries
 WHERE ${SIBLINGS_WHERE} ORDER BY deliveries.id LIMIT $4`;
/** The same short range of the primary key, counted (only when more than a page is there). */
const SIBLINGS_COUNT_SQL = `SELECT count(*)::int AS n FROM (SELECT 1 FROM deliveries WHERE ${SIBLINGS_WHERE} LIMIT $4) x`;

/**
 * Every post of a delivery's callbacks. The failed ones are rows of callback_attempts; a
 * successful one is recorded by its callbacks row alone since migration 018 (status 'delivered',
 * attempts its number, updated_at its time, last_http_status its answer; store/callbacks.ts), and
 * is added from it unless callback_attempts has it (a callback delivered before the migration). A
 * delivered row is final (replays take only dead ones), so its post is never overwritten.
 */
const CALLBACK_POSTS_SQL = `
SELECT p.callback_id::text, p.number, ${isoSql('p.at')} AS at, p.http_status, p.error
  FROM (SELECT a.callback_id, a.number, a.at, a.http_status, a.error
          FROM callback_attempts a JOIN callbacks c ON c.id = a.callback_id WHERE ${callbacksOfSql('c', '= $1')}
        UNION ALL
        SELECT c.id, c.attempts, c.updated_at, c.last_http_status, NULL
          FROM callbacks c
         WHERE ${callbacksOfSql('c', '= $1')} AND c.status = 'delivered'
           AND NOT EXISTS (SELECT 1 FROM callback_attempts a WHERE a.callback_id = c.id AND a.number = c.attempts)) p
 ORDER BY p.callback_id, p.number`;

export async function loadDelivery(db: Db, id: string): Promise<DeliveryDetail | null> {
  const d = await db.query(
    `SELECT ${recordColumns('d', RECORD_FIELD_NAMES, AS_ID)}, d.handoff_id::text, d.client_id, d.provider,
            ${isoSql('d.next_attempt_at')} AS next_attempt_at, h.callback_url, ${isoSql('h.created_at')} AS handoff_created_at,
            h.messages -> d.channel AS content
       FROM deliveries d JOIN handoffs h ON h.id = d.handoff_id WHERE d.id = $1`,
    [id],
  );
  if (!d.rows[0]) return null;
  const handoffId = d.rows[0].handoff_id as string;
  const [attempts, events, callbacks, cbAttempts, siblings] = await Promise.all([
    db.query(
      // The ended attempts, and the one in flight: its row is written when it ends (migration 017),
      // until then it is the delivery's open claim.
      `SELECT number, provider, outcome, error, provider_message_id, ${isoSql('started_at')} AS started_at, ${isoSql('finished_at')} AS finished_at
         FROM attempts WHERE delivery_id = $1
       UNION ALL
       SELECT d.attempts, d.provider, NULL, NULL, NULL, ${isoSql('d.claimed_at')}, NULL
         FROM deliveries d
        WHERE d.id = $1 AND ${attemptInFlightSql('d')}
          AND NOT EXISTS (SELECT FROM attempts a WHERE a.delivery_id = d.id AND a.number = d.attempts)
        ORDER BY 1`,
      [id],
    ),
    db.query(
      `SELECT kind, ${isoSql('occurred_at')} AS occurred_at, ${isoSql('received_at')} AS received_at, detail
         FROM delivery_events WHERE delivery_id = $1 ORDER BY delivery_events.occurred_at, delivery_events.id`,
      [id],
    ),
    db.query(
      `SELECT id::text, ${callbackUrlSql('callbacks')} AS url, status, attempts, last_error, ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at, ${isoSql('next_attempt_at')} AS next_attempt_at
         FROM callbacks WHERE ${callbacksOfSql('callbacks', '= $1')} ORDER BY callbacks.created_at, callbacks.id`,
      [id],
    ),
    db.query(CALLBACK_POSTS_SQL, [id]),
    db.query<SiblingRow>(SIBLINGS_SQL, [
      handoffId,
      id,
      handoffIdsEnd(handoffId),
      SIBLINGS_SHOWN + 1,
    ]),
  ]);
  const { content, ...delivery } = d.rows[0];
  const siblingsMore = siblings.rows.length > SIBLINGS_SHOWN;
  let siblingsTotal: SearchTotal = { n: siblings.rows.length, atLeast: false };
  if (siblingsMore) {
    const range = [handoffId, id, handoffIdsEnd(handoffId), COUNT_BOUND + 1];
    const n = (await db.query<{ n: number }>(SIBLINGS_COUNT_SQL, range)).rows[0]!.n;
    siblingsTotal = n > COUNT_BOUND ? { n: COUNT_BOUND, atLeast: true } : { n, atLeast: false };
  }
  return {
    delivery,
    content: content ?? null,
    siblings: siblings.rows.slice(0, SIBLINGS_SHOWN),
    siblingsMore,
    siblingsTotal,
    attempts: attempts.rows,
    events: events.rows,
    callbacks: callbacks.rows.map((c) => ({
      ...c,
      attempts_list: cbAttempts.rows.filter((a) => a.callback_id === c.id),
    })),
  };
}
