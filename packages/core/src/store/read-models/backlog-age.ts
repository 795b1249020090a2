import type { Db } from '../../db/pool.ts';
import { CHANNELS, type Channel } from '../../schemas/channel.ts';

/*
 * The age of the oldest work that is due and that no one has taken: deliveries waiting for a send
 * and callbacks waiting for a post, per channel. Read from PostgreSQL, so every process sees the
 * whole deployment's backlog, including one whose workers are all gone, where no process that
 * would have logged anything is left. Healthy, it stays near zero; it grows while a channel's
 * work waits.
 */

export type BacklogKind = 'delivery' | 'callback';

export interface BacklogAge {
  kind: BacklogKind;
  channel: Channel;
  /** 0 when nothing of that kind and channel is waiting. */
  ageSeconds: number;
}

const AGE_SQL = `
SELECT 'delivery' AS kind, channel, extract(epoch FROM now() - min(next_attempt_at))::float8 AS age
  FROM deliveries
 WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
 GROUP BY channel
UNION ALL
SELECT 'callback', d.channel, extract(epoch FROM now() - min(c.next_attempt_at))::float8
  FROM callbacks c JOIN deliveries d ON d.id = c.delivery_id
 WHERE c.status = 'pending' AND c.next_attempt_at <= now() AND (c.lease_until IS NULL OR c.lease_until < now())
 GROUP BY d.channel`;

/** Every kind and channel, with 0 where nothing waits. */
export async function readBacklogAge(db: Db): Promise<BacklogAge[]> {
  const { rows } = await db.query<{ kind: BacklogKind; channel: Channel; age: number }>(AGE_SQL);
  const found = new Map(rows.map((r) => [`${r.kind}/${r.channel}`, Math.max(0, r.age)]));
  return (['delivery', 'callback'] as const).flatMap((kind) =>
    CHANNELS.map((channel) => ({
      kind,
      channel,
      ageSeconds: found.get(`${kind}/${channel}`) ?? 0,
    })),
  );
}
