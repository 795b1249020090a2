/**
 * Can a callback's outcome be a HOT update (issue 27)? An experiment, kept so the verdict in
 * results/2026-11-26-wal.md can be checked again: it builds a record of CBI_N callbacks over a day
 * (98 % posted, 1 % dead, 1 % pending, half of those overdue), then claims and posts 1,000 fresh
 * ones as the callbacks role does and prints the WAL per outcome, how many updates were HOT, and
 * the plans of every statement that reads pending or dead callbacks.
 *
 *   node --conditions=ens-source --import=tsx test/bench/callback-indexes.ts
 *   CBI_VARIANT=current|hot  CBI_N=100000
 *
 * "current" is the schema as migrated. "hot" takes `status`, `updated_at` and the outcome's
 * `next_attempt_at` out of every index, which is what a HOT outcome needs (PostgreSQL 15 makes an
 * update HOT only if no column any index uses changes, predicates of partial indexes included):
 * callbacks_due on next_attempt_at for every row (a posted callback keeps its last value), and
 * callbacks_dead on a died_at set only when a callback dies.
 */
import { migrate } from '@ens/core';
import { createPool } from '@ens/core/internal';
import { startTestEngines } from '../harness/engines.ts';

const N = Number(process.env.CBI_N ?? 100_000);
const VARIANT = process.env.CBI_VARIANT === 'hot' ? 'hot' : 'current';
const FRESH = 1000;
const BATCH = 128;

const HOT_SCHEMA = `
ALTER TABLE callbacks ADD COLUMN died_at timestamptz;
UPDATE callbacks SET died_at = updated_at WHERE status = 'dead';
DROP INDEX callbacks_due;
DROP INDEX callbacks_dead;
CREATE INDEX callbacks_due ON callbacks (next_attempt_at);
CREATE INDEX callbacks_dead ON callbacks (client_id, died_at) WHERE died_at IS NOT NULL`;

/** The outcome of a post that succeeded (store/callbacks.ts RECORD_SQL), as each variant writes it. */
const POSTED = {
  current: `status = 'delivered', lease_until = NULL, last_error = NULL, updated_at = now(), next_attempt_at = now()`,
  hot: `status = 'delivered', lease_until = NULL, last_error = NULL, updated_at = now()`,
};

/** The statements that find pending or dead callbacks, as written in core (constants inlined). */
const READS: { name: string; sql: string; variant?: 'current' | 'hot' }[] = [
  {
    name: 'takeOverdue (the sweeper, every 2 s)',
    sql: `SELECT id FROM callbacks WHERE status = 'pending' AND next_attempt_at < now() - interval '30 s'
            AND (lease_until IS NULL OR lease_until < now()) AND (swept_at IS NULL OR swept_at < now() - interval '30 s')
          ORDER BY next_attempt_at LIMIT 1000 FOR UPDATE SKIP LOCKED`,
  },
  {
    name: 'REWAKE_CALLBACKS_SQL (after a process died)',
    sql: `SELECT id FROM callbacks WHERE status = 'pending' AND next_attempt_at <= now()
            AND (lease_until IS NULL OR lease_until < now()) AND (swept_at IS NULL OR swept_at < now() - interval '10 s')
          ORDER BY next_attempt_at LIMIT 1000 FOR UPDATE SKIP LOCKED`,
  },
  {
    name: 'END_CALLBACK_CLAIMS_SQL (after a process died)',
    sql: `SELECT id FROM callbacks c WHERE c.claimed_by = ANY('{1}'::int[]) AND c.status = 'pending' AND c.lease_until > now()`,
  },
  {
    name: 'callbackQueueCounts, backlog (dashboard)',
    sql: `SELECT count(*) FROM callbacks WHERE status = 'pending'`,
  },
  {
    name: 'backlog age, callbacks half (metrics)',
    sql: `SELECT d.channel, min(c.next_attempt_at) FROM callbacks c JOIN deliveries d ON d.id = c.delivery_id
           WHERE c.status = 'pending' AND c.next_attempt_at <= now() AND (c.lease_until IS NULL OR c.lease_until < now())
           GROUP BY d.channel`,
  },
  {
    name: 'listDead (CLI, console)',
    variant: 'current',
    sql: `SELECT id FROM callbacks WHERE status = 'dead' AND client_id = 'c1' ORDER BY updated_at LIMIT 50`,
  },
  {
    name: 'listDead (CLI, console)',
    variant: 'hot',
    sql: `SELECT id FROM callbacks WHERE died_at IS NOT NULL AND client_id = 'c1' ORDER BY died_at LIMIT 50`,
  },
];

const engines = await startTestEngines();
const db = createPool(engines.databaseUrl, { max: 1 });
const one = async <T>(sql: string, values: unknown[] = []): Promise<T> =>
  (await db.query(sql, values)).rows[0] as T;
try {
  await migrate(db);
  await db.query(
    `INSERT INTO clients (id, name, secret_hash) VALUES ('c1', 'c1', 'x'), ('c2', 'c2', 'x')`,
  );
  await db.query(`INSERT INTO tenants (client_id, id) VALUES ('c1', 't'), ('c2', 't')`);
  await db.query(`INSERT INTO handoffs (id, client_id, tenant, event_type, messages)
                  VALUES ('00000000-0000-7000-8000-000000000000', 'c1', 't', 'e', '{"sms":{"body":"x"}}')`);
  await db.query(`INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, channel, recipient, attempts, status)
                  SELECT gen_random_uuid(), '00000000-0000-7000-8000-000000000000', 'c1', 't', 'e', 'sms', '+1555' || i, 1, 'sent'
                    FROM generate_series(1, ${N + FRESH}) i`);
  // A body of the size the bench's callbacks have (~450-byte rows).
  await db.query(`INSERT INTO callbacks (id, delivery_id, client_id, url, body, status, attempts, next_attempt_at, created_at, updated_at)
    SELECT gen_random_uuid(), d.id, CASE WHEN r % 2 = 0 THEN 'c1' ELSE 'c2' END, 'https://example.com/cb', repeat('x', 380),
           CASE WHEN r % 100 = 0 THEN 'dead' WHEN r % 100 = 1 THEN 'pending' ELSE 'delivered' END,
           CASE WHEN r % 100 = 0 THEN 8 ELSE 1 END,
           CASE WHEN r % 200 = 1 THEN now() + interval '1 hour' ELSE now() - r * interval '0.8 s' END,
           now() - r * interval '0.8 s', now() - r * interval '0.8 s'
      FROM (SELECT id, row_number() OVER () AS r FROM deliveries LIMIT ${N}) d`);
  if (VARIANT === 'hot') await db.query(HOT_SCHEMA);
  await db.query('VACUUM ANALYZE');

  const fresh = (
    await db.query<{ id: string }>(`INSERT INTO callbacks (id, delivery_id, client_id, url, body)
      SELECT gen_random_uuid(), d.id, 'c1', 'https://example.com/cb', repeat('x', 380)
        FROM (SELECT id FROM deliveries ORDER BY id DESC LIMIT ${FRESH}) d RETURNING id`)
  ).rows.map((r) => r.id);
  const updates = async () => {
    await db.query('SELECT pg_stat_force_next_flush()');
    return one<{ all: number; hot: number }>(
      `SELECT n_tup_upd::int AS all, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables WHERE relname = 'callbacks'`,
    );
  };
  const walSince = async (lsn: string) =>
    (
      await one<{ d: number }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::float8 AS d', [
        lsn,
      ])
    ).d;
  const lsn = async () => (await one<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).l;

  const before = await updates();
  let from = await lsn();
  await db.query(
    `UPDATE callbacks c SET lease_until = now() + interval '30 s', attempts = c.attempts + 1 WHERE id = ANY($1::uuid[])`,
    [fresh],
  );
  const claimWal = await walSince(from);
  from = await lsn();
  for (let i = 0; i < fresh.length; i += BATCH)
    await db.query(`UPDATE callbacks c SET ${POSTED[VARIANT]} WHERE id = ANY($1::uuid[])`, [
      fresh.slice(i, i + BATCH),
    ]);
  const outcomeWal = await walSince(from);
  const after = await updates();
  console.log(
    `${VARIANT}, ${N} callbacks: claim ${(claimWal / FRESH).toFixed(0)} B of WAL each, outcome ${(outcomeWal / FRESH).toFixed(0)} B each; ${after.all - before.all} updates, ${after.hot - before.hot} HOT`,
  );

  for (const read of READS) {
    if (read.variant && read.variant !== VARIANT) continue;
    const plan = await db.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${read.sql}`,
    );
    console.log(`\n--- ${read.name}\n${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}`);
  }
} finally {
  await db.end();
  await engines.stop();
}
