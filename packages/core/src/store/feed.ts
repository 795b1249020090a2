import type { Db } from '../db/pool.ts';
import { queryByIds } from '../db/pool.ts';
import { recordColumns } from '../domain/delivery-record.ts';
import { Errors } from '../errors.ts';
import type { DeliveryPage, DeliveryQuery, DeliveryRecord } from '../schemas/delivery.ts';
import { isIsoTimestamp } from '../timestamps.ts';

/*
 * One statement, run on its own (autocommit), so the row locks it takes are held only for the
 * statement and its commit: a claim or a finish on a row of the batch waits for no more than that.
 * The clock row lock serialises stampers from the moment `clock` is read to the commit; stamps are
 * computed from the clock, so they exceed every stamp committed before.
 *
 * FOR NO KEY UPDATE is the lock the UPDATE takes anyway (updated_at's unique index is partial, so
 * not a key): unlike FOR UPDATE it does not block foreign-key checks (attempts, callbacks, events)
 * on the rows of the batch.
 */
function stampSql(batch: string, result: string): string {
  return `
WITH clock AS (
  SELECT last FROM feed_clock WHERE id = 1 FOR UPDATE
), batch AS (
  -- The clock before any row: an outcome takes the clock and then updates its rows (FINISH_SQL in
  -- deliveries.ts), so a batch that locked its rows first and then waited for the clock could hold
  -- the very row that outcome waits for (a deadlock; test/feed/clock-order.test.ts). A condition
  -- with no column in it is checked once, before the scan below it reads a row.
  SELECT b.* FROM (${batch}) b WHERE (SELECT true FROM clock)
), numbered AS (
  SELECT id, row_number() OVER (ORDER BY id) AS n FROM batch
), base AS (
  SELECT greatest(clock_timestamp(), clock.last + interval '1 microsecond') AS t FROM clock
), stamped AS (
  UPDATE deliveries d SET updated_at = base.t + (numbered.n - 1) * interval '1 microsecond', stamp_pending = false
    FROM numbered, base WHERE d.id = numbered.id
  RETURNING d.updated_at
), tick AS (
  UPDATE feed_clock SET last = s.last
    FROM (SELECT max(updated_at) AS last FROM stamped) s
   WHERE feed_clock.id = 1 AND s.last IS NOT NULL
)
${result}`;
}

/*
 * The feed role's batch. Rows under a lease are left for later: an attempt is in flight, and its
 * outcome will change the row again within the lease (or the lease runs out). Stamping them now
 * would cost a row version that the outcome replaces at once, and would make the worker's finish
 * wait for this statement. Nothing is skipped by that: the row keeps stamp_pending and is stamped,
 * above every stamp given so far, once the lease is gone.
 *
 * Rows never stamped and created less than $2 ms ago (the feed role passes FRESH_MS) are left for
 * later too: a new delivery is claimed within moments and its outcome stamps it itself (FINISH_SQL
 * in deliveries.ts), so a stamp now would be a second write of the row that is not HOT
 * (updated_at is indexed): about 0.6 KB of WAL. The two kinds are read from two indexes, so the
 * new rows are not read at all: the old ones are a range of deliveries_unstamped (ids are UUIDv7,
 * ens_uuid7_floor), the rows changed again after a stamp are deliveries_restamp. Nothing waits on
 * this: a read of the feed stamps its client's rows first (STAMP_CLIENT_SQL), and a row not yet
 * stamped when it is older is stamped as before.
 */
/** The feed role's two kinds of rows (above); `olderThan` is the parameter holding FRESH_MS. */
const OLD_NEVER_STAMPED = (
  olderThan: string,
) => `stamp_pending AND (lease_until IS NULL OR lease_until <= now())
                    AND id < ens_uuid7_floor(now() - ${olderThan}::int * interval '1 millisecond')`;
const CHANGED_AFTER_STAMP = `stamp_pending AND updated_at IS NOT NULL
                    AND (lease_until IS NULL OR lease_until <= now())`;

const STAMP_SQL = stampSql(
  `
  SELECT id FROM deliveries
   WHERE id = ANY (ARRAY((SELECT id FROM deliveries
                  WHERE ${OLD_NEVER_STAMPED('$2')}
                  ORDER BY id LIMIT $1)
                UNION ALL
                (SELECT id FROM deliveries
                  WHERE ${CHANGED_AFTER_STAMP}
                  ORDER BY id LIMIT $1)))
     AND stamp_pending AND (lease_until IS NULL OR lease_until <= now())
   ORDER BY id LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED`,
  'SELECT count(*)::int AS n FROM stamped',
);

/** Whether STAMP_SQL has anything to stamp: its two reads, without their locks. */
const STAMP_PENDING_SQL = `
SELECT EXISTS (SELECT 1 FROM deliveries WHERE ${OLD_NEVER_STAMPED('$1')})
    OR EXISTS (SELECT 1 FROM deliveries WHERE ${CHANGED_AFTER_STAMP}) AS pending`;

/*
 * The same stamping for one client's pending rows, leased and new ones included, run by a read of
 * that client's record before it reads: a delivery is in the record as soon as its 202 is
 * answered, not once the feed role gets to it. Stamps still come from the one clock under its
 * lock, so the walk's guarantee is the feed role's. Rows another statement holds are skipped, as
 * the feed role skips them, so the clock is never held while waiting for a row (that would stall
 * the feed role behind a long transaction); see stampClient for the rows a claim holds for a
 * moment. A leased row stamped now is stamped again, higher, when its attempt's outcome lands.
 */
const STAMP_CLIENT_SQL = stampSql(
  `
  SELECT id FROM deliveries
   WHERE stamp_pending AND client_id = $2
   ORDER BY id LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED`,
  `SELECT count(*)::int AS n,
       (SELECT count(*)::int FROM deliveries WHERE stamp_pending AND client_id = $2) - count(*)::int AS skipped FROM stamped`,
);

/**
 * Whether any of a client's changes waits for its stamp; read without a lock, so a read that finds
 * none takes none.
 */
const CLIENT_PENDING_SQL =
  'SELECT EXISTS (SELECT 1 FROM deliveries WHERE stamp_pending AND client_id = $1) AS pending';

/**
 * A worker claims a new delivery within moments of its accept, holding its row for the claim's
 * one statement: a read whose stamping skipped some of the client's rows looks once more, this
 * much later. (Not more: a row held longer belongs to a transaction still open, whose change is not
 * yet in the record for anyone.)
 */
const READ_STAMP_PAUSE_MS = 5;

/** At most this many of one client's rows are stamped by a read; the feed role does the rest. */
const READ_STAMP_BATCH = 5000;

/**
 * Stamps pending changes into the change feed and returns how many rows it stamped.
 *
 * Invariant 3 of DESIGN.md: a reader that walks `updated_at > last-seen` must never miss a change.
 * A timestamp taken by each writer would not do: writers commit out of order, so a row stamped
 * earlier can become visible after a reader has moved past its stamp. Instead one writer at a time
 * (serialised by the `feed_clock` row lock, held until commit) stamps a batch of changed rows with
 * values above every stamp committed so far, and commits before the next batch can begin. Rows that
 * a worker is still changing are skipped (SKIP LOCKED, or leased) and stamped in a later batch,
 * after their change commits.
 */
export async function stampBatch(db: Db, batchSize: number, olderThanMs = 0): Promise<number> {
  // The batch takes the clock's row lock before it reads (stampSql); an idle pass (every 200 ms in
  // the feed role) must not, or it would write a lock and use a transaction id each time.
  const pending = await db.query<{ pending: boolean }>({
    name: 'ens-feed-pending',
    text: STAMP_PENDING_SQL,
    values: [olderThanMs],
  });
  if (!pending.rows[0]!.pending) return 0;
  const { rows } = await queryByIds<{ n: number }>(db, {
    text: STAMP_SQL,
    values: [batchSize, olderThanMs],
  });
  return rows[0]!.n;
}

/** Stamps one client's pending changes (see STAMP_CLIENT_SQL); returns how many rows it stamped. */
export async function stampClient(
  db: Db,
  clientId: string,
  batchSize = READ_STAMP_BATCH,
): Promise<number> {
  const pending = await db.query<{ pending: boolean }>({
    name: 'ens-feed-client-pending',
    text: CLIENT_PENDING_SQL,
    values: [clientId],
  });
  if (!pending.rows[0]!.pending) return 0;
  const stamp = () =>
    queryByIds<{ n: number; skipped: number }>(db, {
      text: STAMP_CLIENT_SQL,
      values: [batchSize, clientId],
    }).then((r) => r.rows[0]!);
  const first = await stamp();
  if (first.skipped <= 0 || first.n + first.skipped > batchSize) return first.n;
  await new Promise((r) => setTimeout(r, READ_STAMP_PAUSE_MS));
  return first.n + (await stamp()).n;
}

/** The cursor is opaque to callers: base64url of the last row's feed stamp. */
function encodeCursor(updatedAt: string): string {
  return Buffer.from(JSON.stringify({ u: updatedAt })).toString('base64url');
}

function decodeCursor(cursor: string): string {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { u?: unknown };
    if (typeof v.u === 'string' && isIsoTimestamp(v.u)) return v.u;
  } catch {
    // fall through to the error below
  }
  throw Errors.validation('cursor is not a next_cursor this service returned', [
    { path: '/cursor', message: 'unknown cursor' },
  ]);
}

/**
 * One page of a client's change feed, in feed-stamp order. The client's changes still waiting for
 * the feed role are stamped first, so a delivery is there as soon as its 202 was answered; because
 * stamps are assigned in commit order under the one feed clock, walking with updated_since/cursor
 * never skips a change.
 */
export async function readFeed(db: Db, clientId: string, q: DeliveryQuery): Promise<DeliveryPage> {
  if (q.updated_since !== undefined && !isIsoTimestamp(q.updated_since)) {
    throw Errors.validation(
      'updated_since must be an ISO 8601 date-time with an offset, such as ' +
        '2026-01-31T12:00:00.000000+00:00',
      [{ path: '/updated_since', message: 'not an ISO 8601 date-time with offset' }],
    );
  }
  const after = q.cursor !== undefined ? decodeCursor(q.cursor) : (q.updated_since ?? null);
  const limit = q.limit ?? 100;
  // The first page of a read; the pages a cursor follows continue what it started.
  if (q.cursor === undefined) await stampClient(db, clientId);
  const { rows } = await db.query<DeliveryRecord>(
    // ORDER BY names the table's column: the bare name would bind to the formatted text alias in
    // the select list and sort every row of the client instead of walking deliveries_feed.
    `SELECT ${recordColumns('d')} FROM deliveries d
      WHERE client_id = $1 AND d.updated_at IS NOT NULL
        AND ($2::timestamptz IS NULL OR d.updated_at > $2::timestamptz)
        AND ($3::text IS NULL OR reference = $3) AND ($4::text IS NULL OR tenant = $4)
        AND ($5::text IS NULL OR channel = $5) AND ($6::text IS NULL OR status = $6)
      ORDER BY d.updated_at LIMIT $7`,
    [
      clientId,
      after,
      q.reference ?? null,
      q.tenant ?? null,
      q.channel ?? null,
      q.status ?? null,
      limit,
    ],
  );
  const last = rows[rows.length - 1];
  return {
    results: rows,
    next_cursor: rows.length === limit && last ? encodeCursor(last.updated_at) : null,
  };
}
