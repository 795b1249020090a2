import t from 'tap';
import { randomUUID } from 'node:crypto';
import { acceptHandoff, CallbackStore, DeliveryStore, migrate, type AcceptInput } from '@ens/core';
import { createPool, type Db } from '@ens/core/internal';
import { startTestEngines } from '../../../test/harness/engines.ts';
import { smsAcceptInput } from '../../../test/harness/sms-accept-input.ts';

/*
 * The hot statements (a delivery's claim and outcome, a callback's claim, record and hold-off) are
 * named, so each session prepares them once, and after five runs PostgreSQL may keep one generic
 * plan for all later runs, made for the tables as they were then. On an empty record (a new
 * install; the bench's cleared one) those plans walked whole tables for every batch and went on
 * doing so as the tables grew: 200–900 ms for a batch of 64 at 25,000 rows against 1–3 ms for a
 * plan made at that size (the delivery claim read all of attempts, the hold-off all pending
 * callbacks). The claims and the callback statements are written so that any plan reaches their
 * rows only through the batch's own keys; the outcome's kept plan does so as written, and is
 * checked too. The accept's function kept such plans too: its replay lookup hashed all of
 * idempotency_keys for every batch, and the foreign-key check of every new delivery scanned all of
 * handoffs (25,072 and 25,009 rows at this size); it now plans its statements as lookups by key,
 * and deliveries no longer have that foreign key (migration 023).
 */

const GROWN = 25_000;
const BATCH = 64;
const CLIENT = 'plans';

/** A PostgreSQL array literal of the values (null as NULL), for EXECUTE's untyped arguments. */
function arrayLiteral(values: readonly unknown[]): string {
  const items = values.map((v) =>
    v === null ? 'NULL' : `"${String(v).replace(/[\\"]/g, (c) => `\\${c}`)}"`,
  );
  return `'${`{${items.join(',')}}`.replace(/'/g, "''")}'`;
}

interface ScanRead {
  node: string;
  rows: number;
}

/**
 * For each scan of a table or index in an EXPLAIN ANALYZE plan's lines, the rows it read in all
 * its loops (returned and filtered out).
 */
function scansIn(lines: readonly string[]): ScanRead[] {
  const scans: ScanRead[] = [];
  let last: { node: string; rows: number; loops: number } | undefined;
  const close = () => last && scans.push({ node: last.node, rows: last.rows * last.loops });
  for (const line of lines) {
    const node =
      /((?:Seq|Index|Index Only|Bitmap Heap|Bitmap Index) Scan(?: using \S+)? on \S+)/.exec(line);
    const actual = /actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/.exec(line);
    if (node && actual) {
      close();
      last = { node: node[1]!, rows: Number(actual[1]), loops: Number(actual[2]) };
    } else if (actual) {
      close();
      last = undefined;
    }
    // Shown per loop, like rows.
    const removed = /Rows Removed by (?:Filter|Index Recheck): (\d+)/.exec(line);
    if (removed && last) last.rows += Number(removed[1]);
  }
  close();
  return scans;
}

const widestOf = (scans: readonly ScanRead[]): ScanRead =>
  scans.reduce((a, s) => (s.rows > a.rows ? s : a), { node: 'none', rows: 0 });

/**
 * Runs the statement's kept plan once on this session (rolled back) and returns, for each scan of
 * a table or index in it, the rows it read in all its loops (returned and filtered out).
 */
async function scansOf(
  pool: Db,
  name: string,
  args: (unknown[] | number)[],
): Promise<{ scans: ScanRead[]; generic: number; plan: string }> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const { rows } = await c.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE) EXECUTE "${name}"(${args.map((a) => (typeof a === 'number' ? a : arrayLiteral(a))).join(', ')})`,
    );
    await c.query('ROLLBACK');
    const lines = rows.map((r) => r['QUERY PLAN']);
    const scans = scansIn(lines);
    const ps = await c.query<{ generic: number }>(
      'SELECT generic_plans::int AS generic FROM pg_prepared_statements WHERE name = $1',
      [name],
    );
    return { scans, generic: ps.rows[0]?.generic ?? 0, plan: lines.join('\n') };
  } finally {
    c.release();
  }
}

/** A migrated, analysed, empty record with the test's client and its tenant "t". */
async function newRecord(db: Db): Promise<void> {
  await migrate(db);
  await db.query('VACUUM ANALYZE');
  await db.query(`INSERT INTO clients (id, name, secret_hash) VALUES ($1, 'plans', 'x')`, [CLIENT]);
  await db.query(`INSERT INTO tenants (client_id, id) VALUES ($1, 't')`, [CLIENT]);
}

/**
 * Grows the record by GROWN handoffs of one sent-once delivery each, with no ANALYZE after, on a
 * session of its own (so that no priming session's plans are made on it); returns
 * that session's pool for more of the same.
 */
async function growRecord(t: { teardown(fn: () => unknown): void }, url: string): Promise<Db> {
  const grow = createPool(url, { max: 1 });
  t.teardown(() => grow.end());
  await grow.query(
    `INSERT INTO handoffs (id, client_id, tenant, event_type, messages) SELECT gen_random_uuid(), $1, 't', 'grown', '{"sms":{"body":"x"}}' FROM generate_series(1, ${GROWN})`,
    [CLIENT],
  );
  await grow.query(`
    INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, channel, recipient, attempts)
    SELECT gen_random_uuid(), id, client_id, 't', 'grown', 'sms', '+15550000000', 1 FROM handoffs WHERE event_type = 'grown'`);
  return grow;
}

t.test(
  'a hot statement first run on an empty record still reaches only its batch once the record ' +
    'has grown',
  async (t) => {
    const engines = await startTestEngines(t);
    const db = createPool(engines.databaseUrl, { max: 2 });
    // One session each, as a process's sessions are: the statements are prepared there and stay.
    const leases = createPool(engines.databaseUrl, { max: 1, byIds: true, asyncCommit: true });
    const keyed = createPool(engines.databaseUrl, { max: 1, byIds: true });
    t.teardown(async () => {
      await Promise.all([db.end(), leases.end(), keyed.end()]);
    });
    await newRecord(db);
    // Claims record a process session, and check that it is alive (store/process-sessions.ts).
    const session = (
      await db.query<{ id: number }>(
        `INSERT INTO process_sessions (pid, host) VALUES (1, 'plans') RETURNING id`,
      )
    ).rows[0]!.id;
    const deliveries = new DeliveryStore(db, { leases, keyed }, null, { id: () => session });
    const callbacks = new CallbackStore(db, leases, null, { id: () => session });

    // A new install's first sends and callbacks, one at a time.
    for (let i = 0; i < 8; i++) {
      const handoff = randomUUID();
      const delivery = randomUUID();
      const callback = randomUUID();
      await db.query(
        `INSERT INTO handoffs (id, client_id, tenant, event_type, messages) VALUES ($1, $2, 't', 'e', '{"sms":{"body":"x"}}')`,
        [handoff, CLIENT],
      );
      await db.query(
        `INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, channel, recipient) VALUES ($1, $2, $3, 't', 'e', 'sms', '+15550000000')`,
        [delivery, handoff, CLIENT],
      );
      const claimed = await deliveries.claim(delivery, 'sandbox', 30_000);
      if ('reason' in claimed) throw new Error(`claim missed: ${claimed.reason}`);
      // An outcome whose lease ran out (its version moved on) changes nothing; then the real one.
      await deliveries.finish(
        { ...claimed, version: claimed.version + 1 },
        { outcome: 'sent', provider: 'sandbox', providerMessageId: `m${i}` },
      );
      await deliveries.finish(claimed, {
        outcome: 'sent',
        provider: 'sandbox',
        providerMessageId: `m${i}`,
      });
      await db.query(
        `INSERT INTO callbacks (id, delivery_id, client_id, url, body) VALUES ($1, $2, $3, 'http://receiver.test/', '{}')`,
        [callback, delivery, CLIENT],
      );
      await callbacks.holdOff(callback, 1);
      const cb = await callbacks.claim(callback, 30_000);
      if ('miss' in cb) throw new Error(`callback claim missed: ${cb.miss}`);
      await callbacks.record(cb, { ok: true, httpStatus: 200 }, null);
    }

    // The record grows (autovacuum and the statistics job would analyse it later).
    const grow = await growRecord(t, engines.databaseUrl);
    await grow.query(
      // Each grown delivery's first attempt ended (an attempt's row is written at its end); the
      // finish below is of the second.
      `INSERT INTO attempts (delivery_id, number, provider, outcome, finished_at) SELECT id, 1, 'sandbox', 'transient', now() FROM deliveries WHERE event_type = 'grown'`,
    );
    await grow.query(
      // As ENS queues them since migration 019: a snapshot, the rest read from the delivery.
      `INSERT INTO callbacks (id, delivery_id, client_id, url, snapshot) SELECT gen_random_uuid(), id, client_id, 'http://receiver.test/', '[]' FROM deliveries WHERE event_type = 'grown'`,
    );
    const batch = (
      await db.query<{ id: string; version: number }>(
        `SELECT id, version FROM deliveries WHERE event_type = 'grown' ORDER BY random() LIMIT ${BATCH}`,
      )
    ).rows;
    const ids = batch.map((r) => r.id);
    const cbIds = (
      await db.query<{ id: string }>(
        `SELECT id FROM callbacks WHERE status = 'pending' ORDER BY random() LIMIT ${BATCH}`,
      )
    ).rows.map((r) => r.id);
    const each = <T>(ids: string[], v: T) => ids.map(() => v);

    const statements: [string, Db, (unknown[] | number)[]][] = [
      ['ens-claim-deliveries', leases, [ids, each(ids, 'sandbox'), each(ids, 30_000), session]],
      [
        'ens-finish-deliveries',
        keyed,
        [
          ids,
          batch.map((r) => r.version),
          each(ids, 'sent'),
          each(ids, 'sandbox'),
          each(ids, 'm'),
          each(ids, new Date().toISOString()),
          each(ids, null),
          each(ids, 0),
          each(ids, 'sent'),
          each(ids, 2),
          each(ids, CLIENT),
          each(ids, null),
          each(ids, null),
          each(ids, null),
          session,
        ],
      ],
      ['ens-claim-callbacks', leases, [cbIds, each(cbIds, 30_000), session]],
      [
        'ens-record-callbacks',
        leases,
        [
          cbIds,
          each(cbIds, 'delivered'),
          each(cbIds, null),
          each(cbIds, 0),
          each(cbIds, 0),
          each(cbIds, 200),
        ],
      ],
      ['ens-hold-off-callbacks', leases, [cbIds, each(cbIds, 1000)]],
    ];
    for (const [name, pool, args] of statements) {
      const r = await scansOf(pool, name, args);
      t.ok(
        r.generic > 0,
        `${name} runs the plan it kept from the empty record (${r.generic} generic runs)`,
      );
      // Each id of the batch looked up once per table: a few rows each, never a walk of 25,000.
      const widest = widestOf(r.scans);
      t.ok(
        r.scans.length > 0 && widest.rows <= 2 * BATCH,
        `${name}: for a batch of ${BATCH}, the widest scan read ${widest.rows} rows (${widest.node}):\n${r.plan}`,
      );
    }
  },
);

/**
 * The same for the accept (ens_accept_batch), whose statements are planned once per session by
 * PL/pgSQL, and for the foreign-key checks its inserts run. Their plans cannot be run by name, so
 * auto_explain reports them, with the rows each scan read, as notices on the session itself.
 */
t.test(
  'the accept first run on an empty record still reaches only its batch once the record has grown',
  async (t) => {
    const engines = await startTestEngines(t);
    const db = createPool(engines.databaseUrl, { max: 2 });
    // The accepting session: one, as each of a process's sessions is.
    const accepts = createPool(engines.databaseUrl, { max: 1 });
    const notices: string[] = [];
    accepts.on('connect', (c) => c.on('notice', (n) => notices.push(n.message ?? '')));
    t.teardown(async () => {
      await Promise.all([db.end(), accepts.end()]);
    });
    await newRecord(db);
    const input = (key: string): AcceptInput => smsAcceptInput(CLIENT, key, ['+15550000000']);

    // A new install's first sends, one at a time.
    for (let i = 0; i < 8; i++) await acceptHandoff(accepts, input(`first-${i}`));

    // The record grows, and the keys with it.
    const grow = await growRecord(t, engines.databaseUrl);
    await grow.query(
      `INSERT INTO idempotency_keys (client_id, key, request_hash, response) SELECT client_id, id::text, 'h', '{}' FROM handoffs WHERE event_type = 'grown'`,
    );

    // A batch of new handoffs and one replay, explained as they run on the accepting session.
    await accepts.query(`LOAD 'auto_explain'`);
    for (const set of [
      'log_min_duration = 0',
      'log_analyze = on',
      'log_nested_statements = on',
      'log_level = notice',
    ])
      await accepts.query(`SET auto_explain.${set}`);
    notices.length = 0;
    const outcomes = await Promise.all(
      [...Array.from({ length: BATCH }, (_, i) => input(`later-${i}`)), input('first-0')].map((a) =>
        acceptHandoff(accepts, a),
      ),
    );
    t.same(
      outcomes.map((o) => o.outcome),
      [...Array.from({ length: BATCH }, () => 'created'), 'replay'],
      'the batch was accepted, the repeated key replayed',
    );
    const plans = notices.filter((n) => n.includes('actual time='));
    t.ok(
      plans.length >= 5,
      `auto_explain reported the accept's statements (${plans.length} plans)`,
    );
    for (const plan of plans) {
      const widest = widestOf(scansIn(plan.split('\n')));
      t.ok(
        widest.rows <= 2 * (BATCH + 1),
        `the widest scan read ${widest.rows} rows (${widest.node}):\n${plan}`,
      );
    }
  },
);
