import { EnsError } from '@ens/plugin-sdk';
import type { Logger } from 'pino';
import { inTransaction, type Db, type DbClient } from '../db/pool.ts';
import { retentionBatches, retentionRemoved } from '../metrics.ts';
import { callbacksOfSql } from '../store/callbacks.ts';

/*
 * ENS_RETENTION: how long the record of a handoff is kept. The sweeper removes whole handoffs
 * older than that, with every row that hangs off them, in short transactions of at most
 * `batchSize` deliveries each, so no statement runs long and no lock is held for more than one
 * batch. (Dropping old partitions of time-partitioned tables costs less per row;
 * docs/guides/retention.md has the numbers and why this was chosen instead.)
 *
 * The rule: a handoff is removed when its id (UUIDv7, so its creation time) is older than the
 * retention, none of its deliveries is pending or has a change the feed has not stamped yet, and
 * none of their callbacks is pending. A handoff that is not done stays, whatever its age, with all
 * its deliveries, and goes at the first round after it is done. What is final cannot become live
 * behind this job's back: a batch locks the handoffs and deliveries it removes and deletes only
 * rows that are still final. A row another writer adds or revives meanwhile (a dead letter
 * replayed) makes the DELETE of its delivery skip it: that DELETE checks that no attempt and no
 * callback is left (the foreign keys' check, which since migration 020 is made here and not on
 * every insert), so the batch rolls back and the handoff stays.
 */

export interface RetentionOptions {
  /** ENS_RETENTION: handoffs created longer ago than this are removed once done. */
  retentionMs: number;
  /** Most handoffs and most deliveries one batch (one transaction) removes. */
  batchSize?: number;
  /** A round stops after about this long; the next round goes on from the start. */
  maxRoundMs?: number;
}

export const RETENTION_TABLES = [
  'handoffs',
  'deliveries',
  'attempts',
  'delivery_events',
  'callbacks',
  'callback_attempts',
  'media_refs',
  'idempotency_keys',
  'usage_daily',
] as const;
export type RetentionTable = (typeof RETENTION_TABLES)[number];

export interface RetentionRoundResult {
  /** Transactions that removed something. */
  batches: number;
  removed: Record<RetentionTable, number>;
  ms: number;
  /** False when the round stopped at maxRoundMs with work left. */
  done: boolean;
}

const DEFAULT_BATCH = 1000;
const DEFAULT_MAX_ROUND_MS = 60_000;
/** A batch waits this long at most for a row lock; a busy row is left for the next round. */
const LOCK_TIMEOUT_MS = 2_000;
const STATEMENT_TIMEOUT_MS = 30_000;
/** Where the next batch starts: after `id`, or at it (a handoff the previous batch only began). */
interface Cursor {
  id: string;
  inclusive: boolean;
}

/**
 * A batch whose rows changed under it (PostgreSQL refused the DELETE, or skipped a row now live).
 */
class BatchRaced extends EnsError {
  static override readonly code: string = 'ENS_ERR_RETENTION_BATCH_RACED';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Removes up to `n` deliveries of done handoffs with ids below `floor` after `from`; null when none
 * is left.
 */
async function removeBatch(
  c: DbClient,
  floor: string,
  n: number,
  from: Cursor | null,
): Promise<{ next: Cursor; removed: Partial<Record<RetentionTable, number>> } | null> {
  await c.query(`SET LOCAL lock_timeout = ${LOCK_TIMEOUT_MS}`);
  await c.query(`SET LOCAL statement_timeout = ${STATEMENT_TIMEOUT_MS}`);
  // Another process's round holds the handoffs it is removing: skip them, it will finish them.
  const candidates = (
    await c.query<{ id: string }>(
      `SELECT id::text FROM handoffs
      WHERE id < $1::uuid AND ($2::uuid IS NULL OR id > $2::uuid OR (id = $2::uuid AND $3))
      ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED`,
      [floor, from?.id ?? null, from?.inclusive ?? false, n],
    )
  ).rows.map((r) => r.id);
  if (candidates.length === 0) return null;
  const last = candidates[candidates.length - 1]!;
  const live = new Set(
    (
      await c.query<{ handoff_id: string }>(
        `SELECT DISTINCT d.handoff_id::text FROM deliveries d
      WHERE d.handoff_id = ANY ($1::uuid[])
        AND (d.status = 'pending' OR d.stamp_pending
             OR EXISTS (SELECT FROM callbacks cb WHERE ${callbacksOfSql('cb', '= d.id')} AND cb.status = 'pending'))`,
        [candidates],
      )
    ).rows.map((r) => r.handoff_id),
  );
  const done = candidates.filter((id) => !live.has(id));
  if (done.length === 0) return { next: { id: last, inclusive: false }, removed: {} };

  // Deliveries in handoff order, so a handoff larger than the batch is the last one touched.
  const victims = (
    await c.query<{ id: string; handoff_id: string }>(
      `SELECT id::text, handoff_id::text FROM deliveries WHERE handoff_id = ANY ($1::uuid[]) ORDER BY handoff_id, id LIMIT $2 FOR UPDATE`,
      [done, n],
    )
  ).rows;
  const ids = victims.map((v) => v.id);
  const count = async (sql: string, values: unknown[]) =>
    (await c.query(sql, values)).rowCount ?? 0;
  const removed: Partial<Record<RetentionTable, number>> = {};
  if (ids.length > 0) {
    removed.media_refs = await count(
      'DELETE FROM media_refs WHERE delivery_id = ANY ($1::uuid[])',
      [ids],
    );
    removed.callback_attempts = await count(
      `DELETE FROM callback_attempts WHERE callback_id IN (SELECT id FROM callbacks cb WHERE ${callbacksOfSql('cb', '= ANY ($1::uuid[])')})`,
      [ids],
    );
    removed.callbacks = await count(
      `DELETE FROM callbacks cb WHERE ${callbacksOfSql('cb', '= ANY ($1::uuid[])')} AND cb.status <> 'pending'`,
      [ids],
    );
    removed.delivery_events = await count(
      'DELETE FROM delivery_events WHERE delivery_id = ANY ($1::uuid[])',
      [ids],
    );
    removed.attempts = await count('DELETE FROM attempts WHERE delivery_id = ANY ($1::uuid[])', [
      ids,
    ]);
    // Attempts and callbacks have no foreign key (migration 020): this is their check. A callback
    // left here is one that became pending under the batch (a replay committed after the live
    // check), and its delivery must stay.
    removed.deliveries = await count(
      `DELETE FROM deliveries d WHERE d.id = ANY ($1::uuid[]) AND d.status <> 'pending' AND NOT d.stamp_pending
          AND NOT EXISTS (SELECT FROM callbacks cb WHERE ${callbacksOfSql('cb', '= d.id')})
          AND NOT EXISTS (SELECT FROM attempts a WHERE a.delivery_id = d.id)`,
      [ids],
    );
    if (removed.deliveries !== ids.length)
      throw new BatchRaced('a delivery changed while it was being removed');
  }
  const gone = (
    await c.query<{ id: string }>(
      `DELETE FROM handoffs h WHERE h.id = ANY ($1::uuid[]) AND NOT EXISTS (SELECT FROM deliveries d WHERE d.handoff_id = h.id) RETURNING h.id::text`,
      [done],
    )
  ).rows.map((r) => r.id);
  removed.handoffs = gone.length;
  // A full batch may have stopped inside a handoff, with later candidates untouched: the next
  // batch starts at that handoff (after it, when it went). Live candidates before it are passed
  // over until the next round, as they are in any batch.
  if (ids.length < n) return { next: { id: last, inclusive: false }, removed };
  const reached = victims[victims.length - 1]!.handoff_id;
  return { next: { id: reached, inclusive: !gone.includes(reached) }, removed };
}

/**
 * Deletes rows of `table` matching `where` ($1 is the round's cut-off time), at most `n` a
 * statement, each statement its own transaction.
 */
async function removeByAge(
  db: Db,
  table: RetentionTable,
  where: string,
  before: Date,
  n: number,
  onBatch: (rows: number) => void,
): Promise<void> {
  for (;;) {
    const r = await db.query(
      `DELETE FROM ${table} WHERE ctid = ANY (ARRAY(SELECT ctid FROM ${table} WHERE ${where} LIMIT $2))`,
      [before, n],
    );
    const rows = r.rowCount ?? 0;
    if (rows > 0) onBatch(rows);
    if (rows < n) return;
  }
}

/**
 * One pass over everything older than the retention: done handoffs with their rows, then
 * idempotency keys and daily usage counts older than the retention. Each batch is paced by its
 * own duration (it waits as long as it worked), so the job never takes more than half of one
 * connection's time, however much there is to remove.
 */
export async function retentionRound(
  deps: { db: Db; logger: Logger },
  opts: RetentionOptions,
): Promise<RetentionRoundResult> {
  const n = opts.batchSize ?? DEFAULT_BATCH;
  const maxRoundMs = opts.maxRoundMs ?? DEFAULT_MAX_ROUND_MS;
  const t0 = Date.now();
  const removed = Object.fromEntries(RETENTION_TABLES.map((t) => [t, 0])) as Record<
    RetentionTable,
    number
  >;
  let batches = 0;
  const tally = (part: Partial<Record<RetentionTable, number>>, ms: number) => {
    for (const [table, rows] of Object.entries(part) as [RetentionTable, number][]) {
      removed[table] += rows;
      if (rows > 0) retentionRemoved.inc({ table }, rows);
    }
    batches++;
    retentionBatches.inc();
    deps.logger.debug(
      { handoffs: part.handoffs ?? 0, deliveries: part.deliveries ?? 0, ms },
      'retention batch',
    );
  };
  const overTime = () => Date.now() - t0 > maxRoundMs;
  // One cut-off for the whole round, so a long round does not chase rows made while it runs.
  const { before, floor } = (
    await deps.db.query<{ before: Date; floor: string }>(
      `SELECT now() - ($1::bigint * interval '1 millisecond') AS before, ens_uuid7_floor(now() - ($1::bigint * interval '1 millisecond'))::text AS floor`,
      [opts.retentionMs],
    )
  ).rows[0]!;

  let from: Cursor | null = null;
  let done = true;
  for (;;) {
    if (overTime()) {
      done = false;
      break;
    }
    const b0 = Date.now();
    let outcome: Awaited<ReturnType<typeof removeBatch>>;
    try {
      outcome = await inTransaction(deps.db, (c) => removeBatch(c, floor, n, from));
    } catch (e) {
      // A row that became live under the batch (a callback made pending again, or 23503: a
      // provider event added to a delivery being removed): the batch is undone and tried again,
      // when the handoff counts as live.
      const code = (e as { code?: string }).code;
      if (e instanceof BatchRaced || code === '23503') {
        deps.logger.info(
          { err: e },
          'retention batch undone: a handoff became live while it was being removed',
        );
        continue;
      }
      // 55P03: a row it needs stayed locked past LOCK_TIMEOUT_MS; the next round tries again.
      if (code === '55P03') {
        deps.logger.info(
          'retention round ends early: a row it would remove is locked by another transaction',
        );
        done = false;
        break;
      }
      throw e;
    }
    if (outcome === null) break;
    from = outcome.next;
    const ms = Date.now() - b0;
    if ((outcome.removed.handoffs ?? 0) > 0 || (outcome.removed.deliveries ?? 0) > 0) {
      tally(outcome.removed, ms);
      await sleep(ms);
    }
  }
  if (done) {
    const onBatch = (table: RetentionTable) => (rows: number) => tally({ [table]: rows }, 0);
    await removeByAge(
      deps.db,
      'idempotency_keys',
      'created_at < $1',
      before,
      n,
      onBatch('idempotency_keys'),
    );
    await removeByAge(
      deps.db,
      'usage_daily',
      `day < ($1::timestamptz AT TIME ZONE 'UTC')::date`,
      before,
      n,
      onBatch('usage_daily'),
    );
  }
  const result = { batches, removed, ms: Date.now() - t0, done };
  const level = removed.handoffs + removed.idempotency_keys > 0 ? 'info' : 'debug';
  deps.logger[level]({ batches, removed, ms: result.ms, done }, 'retention round');
  return result;
}
