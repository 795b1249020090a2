import type pg from 'pg';
import { checkAborted } from './cleanup.ts';
import { progress, sleep } from './log.ts';

export interface Backlog {
  pendingDeliveries: number;
  unstamped: number;
  pendingCallbacks: number;
}

/** Work ENS still has queued, read straight from PostgreSQL (each count uses a partial index). */
export async function backlog(db: pg.Pool): Promise<Backlog> {
  const { rows } = await db.query<Backlog>(
    `SELECT (SELECT count(*) FROM deliveries WHERE status = 'pending')::int AS "pendingDeliveries",
            (SELECT count(*) FROM deliveries WHERE stamp_pending)::int AS "unstamped",
            (SELECT count(*) FROM callbacks WHERE status = 'pending')::int AS "pendingCallbacks"`,
  );
  return rows[0]!;
}

/**
 * Waits until ENS has nothing left to send, stamp or post, so the next phase starts from idle.
 * Returns how long it took and the backlog found at the start.
 */
export async function waitIdle(
  db: pg.Pool,
  label: string,
  timeoutMs = 180_000,
): Promise<{ ms: number; initial: Backlog; drained: boolean }> {
  const t0 = Date.now();
  const initial = await backlog(db);
  let last = initial;
  let lastLog = 0;
  while (last.pendingDeliveries + last.unstamped + last.pendingCallbacks > 0) {
    checkAborted();
    if (Date.now() - t0 > timeoutMs) {
      progress(`${label}: NOT drained after ${timeoutMs / 1000} s: ${JSON.stringify(last)}`);
      return { ms: Date.now() - t0, initial, drained: false };
    }
    if (Date.now() - lastLog > 3000) {
      lastLog = Date.now();
      progress(
        `${label}: waiting for ENS to drain: ${last.pendingDeliveries} deliveries pending, ${last.unstamped} unstamped, ${last.pendingCallbacks} callbacks pending`,
      );
    }
    await sleep(100);
    last = await backlog(db);
  }
  return { ms: Date.now() - t0, initial, drained: true };
}

/**
 * Polls every `everyMs` until no delivery is pending (the caller made sure ENS was idle before its
 * sends, so every pending row is one of its own). Returns the wall time at which that was seen.
 *
 * The poll asks only whether a pending row exists, which stops at the first one it finds; counting
 * them all every 20 ms cost PostgreSQL about a tenth of its time during a 10,000 fan-out (3 ms a
 * count), CPU the run under measurement then lacked. The count is read only for the progress line.
 *
 * The poll goes through the pending rows' partial index (deliveries_due), never a scan of the
 * table: with the statistics of an emptied record (clearRecord) and 25,000 rows since, the planner
 * chose a sequential scan of deliveries for it, every 20 ms, which cost PostgreSQL more as the
 * record grew (383 ms of its time over one 10,000 handoff after 25,000 deliveries, against 21 ms on
 * an empty record) and so slowed the "grown record" runs by the bench's own doing. One round trip
 * still.
 */
const PENDING_POLL = `BEGIN; SET LOCAL enable_seqscan = off; SELECT EXISTS (SELECT FROM deliveries WHERE status = 'pending') AS pending; COMMIT`;

export async function waitNoPending(
  db: pg.Pool,
  label: string,
  everyMs = 20,
  timeoutMs = 300_000,
): Promise<number> {
  const t0 = Date.now();
  let lastLog = t0;
  for (;;) {
    checkAborted();
    const polled = (await db.query(PENDING_POLL)) as unknown as pg.QueryResult<{
      pending: boolean;
    }>[];
    const now = performance.timeOrigin + performance.now();
    if (!polled[2]!.rows[0]!.pending) return now;
    const overdue = Date.now() - t0 > timeoutMs;
    if (overdue || Date.now() - lastLog > 3000) {
      lastLog = Date.now();
      const n = (
        await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM deliveries WHERE status = 'pending'`,
        )
      ).rows[0]!.n;
      if (overdue)
        throw new Error(`${label}: ${n} deliveries still pending after ${timeoutMs / 1000} s`);
      progress(`${label}: ${n} deliveries still pending`);
    }
    await sleep(everyMs);
  }
}

/** Status counts of the deliveries of these handoffs. */
export async function statusCounts(
  db: pg.Pool,
  handoffIds: string[],
): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM deliveries WHERE handoff_id = ANY($1::uuid[]) ' +
      'GROUP BY status',
    [handoffIds],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}
