import { mkdir } from 'node:fs/promises';
import { freePort } from '@ens/local-engines';
import { startRoles } from '@ens/app/roles';
import { createLogger, loadConfig, migrate, openRuntime } from '@ens/core';
import {
  listDeadLetterGroups,
  purgeIdempotencyKeys,
  retentionRound,
  searchDeliveries,
  SearchTooSlow,
  type DeliveryFilters,
} from '@ens/core/internal';
import { pino } from 'pino';
import { timeFeedPages, type FeedCase } from '../bench/feed.ts';
import { progress } from '../bench/log.ts';
import { summarise, type LatencySummary } from '../bench/stats.ts';
import { startTestEngines } from '../harness/engines.ts';

/*
 * `npm run scale`: ENS's record at 10,000,000 deliveries (SCALE_DELIVERIES to change it), to show
 * that the feed, the console's searches and the sweeper stay flat as the tables grow and what one
 * retention round costs. Not part of the bench: the fill alone takes a long while.
 *
 * The record is written straight into PostgreSQL with generate_series (as the bench's feed phase
 * does), spread evenly over the last 60 days, in 10 clients: each handoff has 2 sms deliveries,
 * each delivery one attempt and one callback (3.5 rows a delivery). 1 % of deliveries failed, 0.1 %
 * of callbacks are dead letters, 1 in 100,000 deliveries is still pending (due tomorrow). As ENS
 * records them (migration 018), a delivered callback's one post is in its row, and only a dead
 * letter's failed post has a callback attempt row. Each recipient appears 10 times per 10 million,
 * each reference twice.
 *
 * Then it times, one request at a time: feed pages over HTTP (GET /v2/deliveries?limit=1000 at the
 * start, middle and end of one client's feed), the console's searches (by reference, recipient,
 * client, dead letters), the sweeper's overdue rounds, and one retention round that removes the
 * oldest day (ENS_RETENTION 59d); then the feed's first page and a search again, before and after
 * VACUUM. For the comparison with partitioning, the same day of deliveries is also copied into a
 * partition of its own and the partition dropped.
 *
 * PostgreSQL's data goes under SCALE_DIR (default /var/tmp/ens-scale), on disk: at 10 million it
 * needs about 20 GB. Progress lines go to stderr, the report (a table) to stdout.
 */

const TOTAL = Number(process.env.SCALE_DELIVERIES ?? 10_000_000);
const DAYS = 60;
const CLIENTS = 10;
const BATCH = 100_000;
const RUNS = 20;
const DAY_MS = 86_400_000;

if (!Number.isInteger(TOTAL) || TOTAL < BATCH || TOTAL % 2 !== 0)
  throw new Error(`SCALE_DELIVERIES must be an even integer ≥ ${BATCH}`);

process.env.ENS_TEST_TMPDIR ??= process.env.SCALE_DIR ?? '/var/tmp/ens-scale';
await mkdir(process.env.ENS_TEST_TMPDIR, { recursive: true });

const engines = await startTestEngines();
const port = await freePort();
const env = {
  DATABASE_URL: engines.databaseUrl,
  NATS_URL: engines.natsUrl,
  ENS_DATA_DIR: `${engines.dir}/ens`,
  PORT: String(port),
  HOST: '127.0.0.1',
  ENS_LOG_LEVEL: 'warn',
  ENS_RATE_LIMIT: '100000',
};
const config = loadConfig(env);
const rt = await openRuntime(
  config,
  { databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl },
  createLogger(config),
);
const { db } = rt;
await migrate(db);
// The api role only: the sweeper's jobs are timed below, one at a time, not left to their timers.
const roles = await startRoles(rt, ['api'], { port, host: '127.0.0.1' });
const baseUrl = `http://127.0.0.1:${port}`;

const report: { section: string; what: string; value: string }[] = [];
const add = (section: string, what: string, value: string) => {
  report.push({ section, what, value });
  progress(`${section}: ${what}: ${value}`);
};
const ms = (s: LatencySummary) => `p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms`;
const fmt = (n: number) => n.toLocaleString('en-US');

async function timed<T>(
  runs: number,
  fn: () => Promise<T>,
): Promise<{ s: LatencySummary; last: T }> {
  const times: number[] = [];
  let last!: T;
  for (let i = 0; i < runs + 2; i++) {
    const t0 = performance.now();
    last = await fn();
    if (i >= 2) times.push(performance.now() - t0);
  }
  return { s: summarise(times), last };
}

try {
  // Clients with their tenant, made the way `ens clients create` makes them.
  const clients = [];
  for (let i = 0; i < CLIENTS; i++) {
    const c = await rt.clients.create(`scale-${i}`, true);
    await db.query(`INSERT INTO tenants (client_id, id) VALUES ($1, 'scale')`, [c.client_id]);
    clients.push(c);
  }
  const clientIds = clients.map((c) => c.client_id);

  // --- fill -------------------------------------------------------------------------------------
  const { start } = (
    await db.query<{ start: Date }>(`SELECT now() - interval '${DAYS} days' AS start`)
  ).rows[0]!;
  const stepUs = Math.floor((DAYS * DAY_MS * 1000) / TOTAL);
  // A UUIDv7 of time ts: 48-bit ms, version 7, a 12-bit kind (1 handoff, 2 delivery, 3 callback),
  // variant 8, then n, so each id is unique and ids sort by time as ENS's own do.
  const id7 = (ts: string, kind: number, n: string) =>
    `(lpad(to_hex(floor(extract(epoch FROM ${ts}) * 1000)::bigint), 12, '0') || '7' || lpad(to_hex(${kind}), 3, '0') || '8' || lpad(to_hex(${n}), 15, '0'))::uuid`;
  const series = `generate_series($1::bigint, $2::bigint) AS n,
    LATERAL (SELECT $3::timestamptz + n * $4::bigint * interval '1 microsecond' AS ts,
                    $3::timestamptz + (n / 2 * 2) * $4::bigint * interval '1 microsecond' AS hts,
                    ($5::text[])[(n / 2) % ${CLIENTS} + 1] AS client) AS v`;
  const f0 = Date.now();
  for (let from = 0; from < TOTAL; from += BATCH) {
    const to = Math.min(TOTAL, from + BATCH) - 1;
    const args = [from, to, start, stepUs, clientIds];
    const c = await db.connect();
    try {
      await c.query('BEGIN');
      // The rows are made consistent here, so the foreign-key checks (one query per row) are off
      // for the fill, as for a restore; the measured statements below run with them.
      await c.query('SET LOCAL session_replication_role = replica');
      await c.query(
        `INSERT INTO handoffs (id, client_id, tenant, event_type, reference, callback_url, messages, created_at)
         SELECT ${id7('hts', 1, 'n / 2')}, client, 'scale', 'scale.event', 'ref-' || (n / 2), 'https://receiver.example/ens',
                '{"sms": {"kind": "rendered", "body": "hi"}}'::jsonb, hts
           FROM ${series} WHERE n % 2 = 0`,
        args,
      );
      await c.query(
        `INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, reference, channel, recipient, status, attempts, provider,
                                 provider_message_id, sent_at, last_error, next_attempt_at, version, created_at, updated_at, stamp_pending)
         SELECT ${id7('ts', 2, 'n')}, ${id7('hts', 1, 'n / 2')}, client, 'scale', 'scale.event', 'ref-' || (n / 2), 'sms',
                '+1555' || lpad((n % ${TOTAL / 10})::text, 7, '0'),
                CASE WHEN n % 100000 = 11 THEN 'pending' WHEN n % 100 = 7 THEN 'failed' ELSE 'sent' END, 1, 'sandbox', 'sb-' || n,
                CASE WHEN n % 100 = 7 OR n % 100000 = 11 THEN NULL ELSE ts END,
                CASE WHEN n % 100 = 7 THEN 'sandbox: recipient is set up to fail' END,
                CASE WHEN n % 100000 = 11 THEN now() + interval '1 day' ELSE ts END, 2, ts, ts, false
           FROM ${series}`,
        args,
      );
      await c.query(
        `INSERT INTO attempts (delivery_id, number, provider, started_at, finished_at, outcome, provider_message_id, error)
         SELECT ${id7('ts', 2, 'n')}, 1, 'sandbox', ts, ts, CASE WHEN n % 100 = 7 THEN 'permanent' ELSE 'sent' END, 'sb-' || n,
                CASE WHEN n % 100 = 7 THEN 'sandbox: recipient is set up to fail' END
           FROM ${series} WHERE n % 100000 <> 11`,
        args,
      );
      await c.query(
        // A snapshot of the payload's changing fields, as ENS keeps since migration 019.
        `INSERT INTO callbacks (id, delivery_id, client_id, url, snapshot, status, attempts, next_attempt_at, last_error, last_http_status, created_at, updated_at)
         SELECT ${id7('ts', 3, 'n')}, ${id7('ts', 2, 'n')}, client, 'https://receiver.example/ens',
                json_build_array('sent', 1, 'sb-' || n, ts, null, null, null)::text,
                CASE WHEN n % 1000 = 3 THEN 'dead' ELSE 'delivered' END, 1, ts, CASE WHEN n % 1000 = 3 THEN 'HTTP 500' END,
                CASE WHEN n % 1000 = 3 THEN 500 ELSE 200 END, ts, ts
           FROM ${series} WHERE n % 100000 <> 11`,
        args,
      );
      // Only the failed posts (the dead letters'): a successful one is recorded in its row alone.
      await c.query(
        `INSERT INTO callback_attempts (callback_id, number, at, http_status, error)
         SELECT ${id7('ts', 3, 'n')}, 1, ts, 500, 'HTTP 500' FROM ${series} WHERE n % 1000 = 3`,
        args,
      );
      await c.query('COMMIT');
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      c.release();
    }
    const done = to + 1;
    const rate = done / ((Date.now() - f0) / 1000);
    progress(
      `fill: ${fmt(done)} / ${fmt(TOTAL)} deliveries (${rate.toFixed(0)}/s, ~${((TOTAL - done) / rate / 60).toFixed(0)} min left)`,
    );
  }
  add(
    'fill',
    'deliveries (3.5 rows each) over 60 days',
    `${fmt(TOTAL)} in ${((Date.now() - f0) / 60_000).toFixed(1)} min`,
  );
  const v0 = Date.now();
  progress('VACUUM ANALYZE');
  await db.query('VACUUM ANALYZE');
  add('fill', 'VACUUM ANALYZE', `${((Date.now() - v0) / 1000).toFixed(0)} s`);
  const size = (
    await db.query<{ gb: string }>(
      `SELECT round(pg_database_size(current_database()) / 1e9, 1)::text AS gb`,
    )
  ).rows[0]!.gb;
  add('fill', 'database size', `${size} GB`);

  // --- measure ----------------------------------------------------------------------------------
  const client = clients[3]!;
  const token = await (async () => {
    const res = await fetch(`${baseUrl}/v1/oauth2/token/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: client.client_id,
        client_secret: client.client_secret,
      }),
    });
    return ((await res.json()) as { access_token: string }).access_token;
  })();

  const feed = async (label: string) => {
    const perClient = (
      await db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1',
        [client.client_id],
      )
    ).rows[0]!.n;
    const cases: FeedCase[] = await timeFeedPages(
      baseUrl,
      token,
      db,
      client.client_id,
      perClient,
      RUNS,
    );
    for (const c of cases)
      add(label, `feed page of 1,000, ${c.name} (${fmt(perClient)} rows of this client)`, ms(c.ms));
  };
  // A reference, recipient and dead callback that exist, taken from the middle of the record.
  const mid = TOTAL / 2 + 20;
  const sample = (
    await db.query<{ reference: string; recipient: string; client_id: string }>(
      `SELECT reference, recipient, client_id FROM deliveries WHERE id = ${id7(`$1::timestamptz + $2::bigint * $3::bigint * interval '1 microsecond'`, 2, '$2::bigint')}`,
      [start, mid, stepUs],
    )
  ).rows[0]!;
  const searches: [string, DeliveryFilters][] = [
    ['by reference', { reference: sample.reference }],
    ['by recipient', { recipient: sample.recipient }],
    ['by client', { client: sample.client_id }],
    ['by client, failed (1 % of its deliveries)', { client: client.client_id, status: 'failed' }],
  ];
  const search = async (label: string) => {
    for (const [name, f] of searches) {
      try {
        const { s, last } = await timed(RUNS, () => searchDeliveries(db, f));
        add(label, `console search ${name} (${last.rows.length} rows on the page)`, ms(s));
      } catch (e) {
        if (!(e instanceof SearchTooSlow)) throw e;
        add(label, `console search ${name}`, 'over the 5 s statement timeout');
      }
    }
    const { s, last } = await timed(RUNS, () => listDeadLetterGroups(db, {}));
    add(label, `console dead letters, all clients (${fmt(last.total)} dead)`, ms(s));
    const deadClient =
      (
        await db.query<{ client_id: string }>(
          `SELECT client_id FROM callbacks WHERE status = 'dead' LIMIT 1`,
        )
      ).rows[0]?.client_id ?? client.client_id;
    const one = await timed(RUNS, () => listDeadLetterGroups(db, { clientId: deadClient }));
    add(label, `console dead letters, one client (${fmt(one.last.total)} dead)`, ms(one.s));
  };

  await feed('at full size');
  await search('at full size');
  const overdue = await timed(RUNS, () => rt.deliveries.takeOverdue(30_000, 1000));
  add('sweeper', `overdue deliveries round (${overdue.last.length} due)`, ms(overdue.s));
  const overdueCb = await timed(RUNS, () => rt.callbacks.takeOverdue(30_000, 1000));
  add('sweeper', `overdue callbacks round (${overdueCb.last.length} due)`, ms(overdueCb.s));
  const purge = await timed(RUNS, () => purgeIdempotencyKeys(db, 86_400_000));
  add('sweeper', 'idempotency key purge round', ms(purge.s));

  // Partitioning, for comparison: the oldest day of deliveries in a partition of its own, dropped.
  const { floor } = (
    await db.query<{ floor: string }>(
      `SELECT ens_uuid7_floor(now() - interval '${DAYS - 1} days')::text AS floor`,
    )
  ).rows[0]!;
  await db.query(
    `CREATE TABLE scale_probe (LIKE deliveries INCLUDING DEFAULTS) PARTITION BY RANGE (id)`,
  );
  await db.query(
    `CREATE TABLE scale_probe_old PARTITION OF scale_probe FOR VALUES FROM (MINVALUE) TO ('${floor}')`,
  );
  await db.query(
    `CREATE TABLE scale_probe_new PARTITION OF scale_probe FOR VALUES FROM ('${floor}') TO (MAXVALUE)`,
  );
  await db.query(`CREATE INDEX ON scale_probe (client_id, updated_at)`);
  const copied =
    (
      await db.query(`INSERT INTO scale_probe SELECT * FROM deliveries WHERE id < $1::uuid`, [
        floor,
      ])
    ).rowCount ?? 0;
  const p0 = performance.now();
  await db.query('ALTER TABLE scale_probe DETACH PARTITION scale_probe_old');
  await db.query('DROP TABLE scale_probe_old');
  add(
    'retention',
    `partitioning instead: DETACH + DROP of a partition of ${fmt(copied)} deliveries`,
    `${(performance.now() - p0).toFixed(0)} ms`,
  );
  await db.query('DROP TABLE scale_probe');

  // One retention round: the oldest day goes.
  const batchMs: number[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (line: string) => {
        const r = JSON.parse(line) as { msg: string; ms?: number; deliveries?: number };
        if (r.msg === 'retention batch' && (r.deliveries ?? 0) > 0) batchMs.push(r.ms ?? 0);
      },
    },
  );
  const before = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries'))
    .rows[0]!.n;
  const round = await retentionRound(
    { db, logger },
    { retentionMs: (DAYS - 1) * DAY_MS, maxRoundMs: 3_600_000 },
  );
  const rows = Object.values(round.removed).reduce((a, b) => a + b, 0);
  add(
    'retention',
    `one round, ENS_RETENTION=${DAYS - 1}d (the oldest day of ${fmt(before)} deliveries)`,
    `${(round.ms / 1000).toFixed(1)} s for ${fmt(round.removed.deliveries)} deliveries, ${fmt(rows)} rows in all, ${fmt(round.batches)} batches`,
  );
  const b = summarise(batchMs);
  add(
    'retention',
    'one batch of 1,000 deliveries (one transaction, the longest any lock is held)',
    ms(b),
  );
  add(
    'retention',
    'removal rate, paced (waits as long as it works)',
    `${fmt(Math.round(round.removed.deliveries / (round.ms / 1000)))} deliveries/s`,
  );
  const again = await retentionRound({ db, logger }, { retentionMs: (DAYS - 1) * DAY_MS });
  // Its cut-off has moved on by the first round's time, so it finds the few made meanwhile.
  add(
    'retention',
    'the next round',
    `${again.ms} ms (${fmt(again.removed.deliveries)} deliveries removed)`,
  );

  await feed('after the round, before VACUUM');
  await search('after the round, before VACUUM');
  const vac0 = Date.now();
  await db.query('VACUUM ANALYZE handoffs, deliveries, attempts, callbacks, callback_attempts');
  add(
    'retention',
    'VACUUM ANALYZE after the round',
    `${((Date.now() - vac0) / 1000).toFixed(0)} s`,
  );
  await feed('after VACUUM');

  process.stdout.write(`\nENS at ${fmt(TOTAL)} deliveries (npm run scale)\n\n`);
  process.stdout.write(`| where | what | time |\n| --- | --- | --- |\n`);
  for (const r of report) process.stdout.write(`| ${r.section} | ${r.what} | ${r.value} |\n`);
} finally {
  await roles.stop().catch(() => {});
  await rt.close().catch(() => {});
  await engines.stop();
}
