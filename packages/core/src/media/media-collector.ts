import type { Logger } from 'pino';
import { inTransaction, type Db } from '../db/pool.ts';
import { mediaCollected } from '../metrics.ts';
import type { MediaStore } from './media-store.ts';

/*
 * Media objects are content-addressed, so one object may serve many handoffs, and an accept in
 * flight may be about to use an object the collector is looking at. The protocol, with the two
 * tables of migration 005:
 *
 * - an accept records its keys in media_objects (put_at = now()) before writing the objects, and
 *   its deliveries' media_refs in the same transaction as the deliveries;
 * - the collector takes an object only while holding its media_objects row locked, only when the
 *   row's put_at is older than the grace (so no accept that wrote it can still be in flight), and
 *   only when no pending delivery refers to it. It removes the object before it lets the row go,
 *   so an accept that wants the same key waits on the row and then writes the object again.
 *
 * An object with no row at all (written before this version, or by an accept that crashed between
 * the two steps) is judged by the time the store gives it.
 */

/** Records that an accept is about to write these objects; blocks while the collector holds one. */
export async function recordMediaPuts(db: Db, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await db.query(
    `INSERT INTO media_objects (storage_key, put_at) SELECT DISTINCT k, now() FROM unnest($1::text[]) AS k ORDER BY k
     ON CONFLICT (storage_key) DO UPDATE SET put_at = now()`,
    [keys],
  );
}

/**
 * Removes `key` when nothing may use it: no pending delivery refers to it and it was written longer
 * than `graceMs` ago. Returns whether it was removed.
 */
export async function collectIfUnused(
  db: Db,
  media: MediaStore,
  key: string,
  modifiedAt: Date,
  graceMs: number,
): Promise<boolean> {
  return inTransaction(db, async (c) => {
    // Takes the row lock whether or not the row existed; a missing row gets the store's time.
    const { rows } = await c.query<{ fresh: boolean; used: boolean }>(
      `WITH row AS (
         INSERT INTO media_objects AS m (storage_key, put_at) VALUES ($1, $2)
         ON CONFLICT (storage_key) DO UPDATE SET put_at = m.put_at
         RETURNING put_at)
       SELECT (SELECT put_at FROM row) > now() - ($3::bigint * interval '1 millisecond') AS fresh,
              EXISTS (SELECT FROM media_refs r JOIN deliveries d ON d.id = r.delivery_id
                       WHERE r.storage_key = $1 AND d.status = 'pending') AS used`,
      [key, modifiedAt, graceMs],
    );
    const row = rows[0]!;
    if (row.fresh || row.used) return false;
    await media.delete(key);
    await c.query('DELETE FROM media_objects WHERE storage_key = $1', [key]);
    return true;
  });
}

/**
 * One pass of the collector (the media-collect job, jobs/catalogue.ts): removes the media objects
 * no pending delivery uses, `graceMs` (ENS_MEDIA_GRACE) after they were last written: images of
 * deliveries that have ended, and those of requests that were refused or never committed. Returns
 * how many it removed.
 */
export async function collectUnusedMediaPass(
  deps: { db: Db; media: MediaStore; logger: Logger },
  graceMs: number,
): Promise<number> {
  const cutoff = Date.now() - graceMs;
  let removed = 0;
  for await (const o of deps.media.list()) {
    if (o.modifiedAt.getTime() > cutoff) continue;
    if (await collectIfUnused(deps.db, deps.media, o.key, o.modifiedAt, graceMs)) removed++;
  }
  if (removed > 0) {
    mediaCollected.inc(removed);
    deps.logger.info({ removed }, 'removed media objects no pending delivery uses');
  }
  return removed;
}
