import type { Db } from '@ens/core';

/**
 * Stamps pending changes into the change feed and returns how many rows it stamped.
 *
 * Invariant 3 of DESIGN.md: a reader that walks `updated_at > last-seen` must never miss a change.
 * A timestamp taken by each writer would not do: writers commit out of order, so a row stamped
 * earlier can become visible after a reader has moved past its stamp. Instead one writer at a time
 * (serialised by the `feed_clock` row lock) stamps a batch of changed rows with values above every
 * stamp committed so far, and commits before the next batch can begin. Rows that a worker is still
 * changing are skipped (SKIP LOCKED) and stamped in a later batch, after their change commits.
 */
export async function stampBatch(db: Db, batchSize: number): Promise<number> {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    const clock = await c.query<{ last: string }>('SELECT last::text AS last FROM feed_clock WHERE id = 1 FOR UPDATE');
    const { rows } = await c.query<{ n: number; last: string | null }>(
      `WITH batch AS (
         SELECT id FROM deliveries WHERE stamp_pending ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
       ), numbered AS (
         SELECT id, row_number() OVER (ORDER BY id) AS n FROM batch
       ), base AS (
         SELECT greatest(clock_timestamp(), $2::timestamptz + interval '1 microsecond') AS t
       ), stamped AS (
         UPDATE deliveries d SET updated_at = base.t + (numbered.n - 1) * interval '1 microsecond', stamp_pending = false
           FROM numbered, base WHERE d.id = numbered.id
         RETURNING d.updated_at
       )
       SELECT count(*)::int AS n, max(updated_at)::text AS last FROM stamped`,
      [batchSize, clock.rows[0]!.last],
    );
    const r = rows[0]!;
    if (r.n > 0) await c.query('UPDATE feed_clock SET last = $1 WHERE id = 1', [r.last]);
    await c.query('COMMIT');
    return r.n;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}
