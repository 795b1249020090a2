import type { Db } from '../../db/pool.ts';

/*
 * Whether deliveries are still in the record (retention removes old ones), for what names one
 * from elsewhere: a suppression's evidence, a one-click unsubscribe link. One primary-key look-up
 * each.
 */

/** Which of `ids` are still in the record. */
export async function existingDeliveries(
  db: Pick<Db, 'query'>,
  ids: string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await db.query<{ id: string }>(
    'SELECT id::text FROM deliveries WHERE id = ANY($1::uuid[])',
    [ids],
  );
  return new Set(rows.map((r) => r.id));
}

/** Whether delivery `id` is in the record and was created after `since`. */
export async function deliveryCreatedAfter(
  db: Pick<Db, 'query'>,
  id: string,
  since: Date,
): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM deliveries WHERE id = $1 AND created_at > $2', [
    id,
    since.toISOString(),
  ]);
  return rows.length > 0;
}
