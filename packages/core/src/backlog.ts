import { Gauge } from 'prom-client';
import type { Db } from './db/pool.ts';
import { readBacklogAge, type BacklogAge } from './store/read-models/backlog-age.ts';
import { metricsRegistry } from './metrics.ts';

/*
 * ens_backlog_age_seconds: the backlog's age (store/read-models/backlog-age.ts) per kind and
 * channel, read from PostgreSQL by any process that serves /metrics.
 */

/** Scrapes closer together than this reuse the last reading: the query scans the due rows. */
const READ_AT_MOST_EVERY_MS = 5_000;
let source: Db | null = null;
let last: { at: number; ages: BacklogAge[] } | null = null;

new Gauge({
  name: 'ens_backlog_age_seconds',
  help:
    'Age of the oldest delivery due and not claimed (kind="delivery"), and of the oldest ' +
    'callback due and not posted (kind="callback"), per channel',
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
