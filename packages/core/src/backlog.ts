import { Gauge } from 'prom-client';
import { CHANNELS, type Channel } from './schemas/channel.ts';
import type { Db } from './db/pool.ts';
import { metricsRegistry } from './metrics.ts';

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
    CHANNELS.map((channel) => ({ kind, channel, ageSeconds: found.get(`${kind}/${channel}`) ?? 0 })),
  );
}

/** Scrapes closer together than this reuse the last reading: the query scans the due rows. */
const READ_AT_MOST_EVERY_MS = 5_000;
let source: Db | null = null;
let last: { at: number; ages: BacklogAge[] } | null = null;

new Gauge({
  name: 'ens_backlog_age_seconds',
  help: 'Age of the oldest delivery due and not claimed (kind="delivery"), and of the oldest callback due and not posted (kind="callback"), per channel',
  labelNames: ['kind', 'channel'],
  registers: [metricsRegistry],
  // Read from PostgreSQL, the same in every process: the oldest, not a sum over processes.
  aggregator: 'max',
  async collect() {
    if (!source) return;
    if (!last || Date.now() - last.at > READ_AT_MOST_EVERY_MS) {
      try {
        last = { at: Date.now(), ages: await readBacklogAge(source) };
      } catch {
        // PostgreSQL away: the last reading stays; /readyz reports the database.
        if (!last) return;
      }
    }
    this.reset();
    for (const a of last.ages) this.set({ kind: a.kind, channel: a.channel }, a.ageSeconds);
  },
});

/** Points ens_backlog_age_seconds at this process's database (openRuntime does it). */
export function measureBacklogIn(db: Db | null): void {
  source = db;
  last = null;
}
