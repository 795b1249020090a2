import { queryByIds, type Db } from '@ens/core/internal';

/*
 * One statement, run on its own (autocommit), so the row locks it takes are held only for the
 * statement and its commit: a claim or a finish on a row of the batch waits for no more than that.
 * The clock row lock serialises stampers from the moment `clock` is read to the commit; stamps are
 * computed from the clock, so they exceed every stamp committed before.
 *
 * Rows under a lease are left for later: an attempt is in flight, and its outcome will change the
 * row again within the lease (or the lease runs out). Stamping them now would cost a row version
 * that the outcome replaces at once, and would make the worker's finish wait for this statement.
 * Nothing is skipped by that: the row keeps stamp_pending and is stamped, above every stamp given
 * so far, once the lease is gone.
 *
 * FOR NO KEY UPDATE is the lock the UPDATE takes anyway (updated_at's unique index is partial, so
 * not a key): unlike FOR UPDATE it does not block foreign-key checks (attempts, callbacks, events)
 * on the rows of the batch.
 */
const STAMP_SQL = `
WITH clock AS (
  SELECT last FROM feed_clock WHERE id = 1 FOR UPDATE
), batch AS (
  SELECT id FROM deliveries
   WHERE stamp_pending AND (lease_until IS NULL OR lease_until <= now())
   ORDER BY id LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED
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
SELECT count(*)::int AS n FROM stamped`;

/**
 * Stamps pending changes into the change feed and returns how many rows it stamped.
 *
 * Invariant 3 of DESIGN.md: a reader that walks `updated_at > last-seen` must never miss a change.
 * A timestamp taken by each writer would not do: writers commit out of order, so a row stamped
 * earlier can become visible after a reader has moved past its stamp. Instead one writer at a time
 * (serialised by the `feed_clock` row lock, held until commit) stamps a batch of changed rows with
 * values above every stamp committed so far, and commits before the next batch can begin. Rows that
 * a worker is still changing are skipped (SKIP LOCKED, or leased) and stamped in a later batch, after
 * their change commits.
 */
export async function stampBatch(db: Db, batchSize: number): Promise<number> {
  const { rows } = await queryByIds<{ n: number }>(db, { text: STAMP_SQL, values: [batchSize] });
  return rows[0]!.n;
}
