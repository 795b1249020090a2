import type { Db } from '../../db/pool.ts';

/**
 * Today's (UTC) deliveries per channel of each client named, in one statement: the console's
 * clients list counts its page this way (the same count as ClientStore.usageToday, through the
 * feed index).
 */
export async function usageTodayOf(
  db: Db,
  ids: string[],
): Promise<Map<string, Record<string, number>>> {
  const out = new Map<string, Record<string, number>>();
  if (ids.length === 0) return out;
  const { rows } = await db.query<{ client_id: string; channel: string; n: number }>(
    `SELECT client_id, channel, count(*)::int AS n FROM deliveries
      WHERE client_id = ANY($1::text[])
        AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
        AND (updated_at IS NULL OR updated_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
      GROUP BY client_id, channel`,
    [ids],
  );
  for (const r of rows) {
    const m = out.get(r.client_id) ?? {};
    m[r.channel] = r.n;
    out.set(r.client_id, m);
  }
  return out;
}
