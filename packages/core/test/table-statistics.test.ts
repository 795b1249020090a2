import t from 'tap';
import { migrate } from '@ens/core';
import { createPool, queryByIds, refreshStatistics, staleTables } from '@ens/core/internal';
import { startTestEngines } from '../../../test/harness/engines.ts';

/*
 * Issue 11: the pipeline slowed by a third to a half after 25,000 earlier deliveries. The planner
 * joined each batch of 128 ids to attempts by scanning all of attempts: with statistics taken while
 * the tables were empty, and, by its cost model, still at 25,000 rows with fresh ones. Reproduced
 * on the finish's shape of statement: a plain query scans; queryByIds (what the hot statements now
 * run through) looks the ids up by key whatever the statistics. The statistics job keeps every
 * other statement's estimates true while the tables grow.
 */

const FINISH_SHAPE = `
EXPLAIN UPDATE attempts a SET outcome = 'sent', finished_at = now()
  FROM (SELECT * FROM unnest($1::uuid[], $2::int[]) AS x(id, number)) d
 WHERE a.delivery_id = d.id AND a.number = d.number`;

t.test(
  'a batch of ids is joined by key however large the table and whatever its statistics',
  async (t) => {
    const engines = await startTestEngines(t);
    const db = createPool(engines.databaseUrl, { max: 3 });
    t.teardown(() => db.end());
    await migrate(db);
    // As a new install (or the bench's cleared record) leaves them: analysed while empty.
    await db.query('VACUUM ANALYZE deliveries, attempts, handoffs');
    await db.query(`INSERT INTO clients (id, name, secret_hash) VALUES ('c1', 'stats', 'x')`);
    await db.query(`INSERT INTO tenants (client_id, id) VALUES ('c1', 't')`);
    await db.query(
      `INSERT INTO handoffs (id, client_id, tenant, event_type, messages) VALUES ('00000000-0000-7000-8000-000000000001', 'c1', 't', 'e', '{}')`,
    );
    await db.query(`
    INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, channel, recipient, status)
    SELECT gen_random_uuid(), '00000000-0000-7000-8000-000000000001', 'c1', 't', 'e', 'sms', '+15550000000', 'sent' FROM generate_series(1, 25000)`);
    await db.query(
      `INSERT INTO attempts (delivery_id, number, provider, outcome) SELECT id, 1, 'p', 'sent' FROM deliveries`,
    );
    const sample = await db.query<{ id: string }>(
      'SELECT delivery_id AS id FROM attempts ORDER BY random() LIMIT 128',
    );
    const params = [sample.rows.map((r) => r.id), sample.rows.map(() => 1)];
    const planOf = (rows: { 'QUERY PLAN': string }[]) =>
      rows.map((r) => r['QUERY PLAN']).join('\n');
    const plain = async () =>
      planOf((await db.query<{ 'QUERY PLAN': string }>(FINISH_SHAPE, params)).rows);
    const byIds = async () =>
      planOf(
        (await queryByIds<{ 'QUERY PLAN': string }>(db, { text: FINISH_SHAPE, values: params }))
          .rows,
      );

    // The statistics collector reports the new rows within a moment.
    for (let i = 0; i < 100 && (await staleTables(db)).length < 2; i++)
      await new Promise((r) => setTimeout(r, 100));
    t.same(
      (await staleTables(db)).map((s) => s.table),
      ['deliveries', 'attempts'],
      'both tables have outgrown their statistics',
    );
    const stale = await plain();
    t.match(
      stale,
      /Seq Scan on attempts/,
      `with empty statistics, a plain query joins 128 ids by scanning all 25,000 attempts:\n${stale}`,
    );
    const staleByIds = await byIds();
    t.notMatch(staleByIds, /Seq Scan/, `through queryByIds it does not:\n${staleByIds}`);
    t.match(staleByIds, /Index Scan using attempts_pkey/);
    // The pools the hot statements run on carry the settings in their sessions: the same plan, in
    // one statement (autocommit: now() is this statement's own start, not a transaction's begun
    // earlier).
    const keyed = createPool(engines.databaseUrl, { max: 1, byIds: true, asyncCommit: true });
    t.teardown(() => keyed.end());
    const keyedPlan = planOf(
      (await queryByIds<{ 'QUERY PLAN': string }>(keyed, { text: FINISH_SHAPE, values: params }))
        .rows,
    );
    t.notMatch(keyedPlan, /Seq Scan/, `on a byIds pool it does not either:\n${keyedPlan}`);
    t.match(keyedPlan, /Index Scan using attempts_pkey/);
    const single = `SELECT now() = statement_timestamp() AS alone, current_setting('synchronous_commit') AS sync`;
    t.same(
      (await queryByIds<{ alone: boolean; sync: string }>(keyed, { text: single })).rows[0],
      { alone: true, sync: 'off' },
      "on a byIds pool the statement runs alone, one round trip, and keeps the pool's commit mode",
    );
    t.same(
      (await queryByIds<{ alone: boolean; sync: string }>(db, { text: single })).rows[0],
      { alone: false, sync: 'on' },
      'on any other pool it runs inside the transaction that sets the plans',
    );

    t.same(
      await refreshStatistics(db),
      ['deliveries', 'attempts'],
      'the statistics job analyses exactly the two tables that grew',
    );
    t.ok((await staleTables(db)).length === 0, 'and they are no longer stale');
    // Issue 27: the columns no index uses were most of ANALYZE's work (long, nearly unique text),
    // and this job's ANALYZE 4-7 % of PostgreSQL's CPU in the WAL bench.
    const analysed = (
      await db.query<{ attname: string }>(
        `SELECT attname FROM pg_stats WHERE tablename = 'deliveries' AND schemaname = current_schema() ORDER BY attname`,
      )
    ).rows.map((r) => r.attname);
    t.same(
      analysed,
      [
        'client_id',
        'handoff_id',
        'id',
        'next_attempt_at',
        'provider_message_id',
        'recipient',
        'reference',
        'stamp_pending',
        'status',
        'updated_at',
      ],
      'only the columns that some index uses (keys and predicates) were analysed',
    );
    const { rows: mods } = await db.query<{ n: string }>(
      `SELECT n_mod_since_analyze AS n FROM pg_stat_user_tables WHERE relname = 'deliveries' AND schemaname = current_schema()`,
    );
    t.ok(
      Number(mods[0]!.n) >= 25_000,
      `autovacuum's own count of changes is left for it, so it still analyses every column (${mods[0]!.n})`,
    );
    const fresh = await plain();
    t.match(
      fresh,
      /Seq Scan on attempts/,
      `with true statistics the cost model still scans at 25,000 rows:\n${fresh}`,
    );
    t.match(
      await byIds(),
      /Index Scan using attempts_pkey/,
      'queryByIds still looks the ids up by key',
    );
    t.same(await refreshStatistics(db), [], 'a second round finds nothing stale');
  },
);

t.test('another process holding the turn: the round is skipped', async (t) => {
  const engines = await startTestEngines(t);
  const db = createPool(engines.databaseUrl, { max: 3 });
  t.teardown(() => db.end());
  await migrate(db);
  const holder = await db.connect();
  await holder.query('SELECT pg_advisory_lock(7466010)');
  await db.query(`INSERT INTO idempotency_keys SELECT * FROM idempotency_keys LIMIT 0`);
  t.same(await refreshStatistics(db), [], 'nothing done while the lock is held elsewhere');
  await holder.query('SELECT pg_advisory_unlock(7466010)');
  holder.release();
});
