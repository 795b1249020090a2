/**
 * What one delivery costs PostgreSQL over its whole life (issue 27): WAL bytes and PostgreSQL CPU
 * per delivery, over 10,000-recipient handoffs with callbacks on, all roles in one ENS, against a
 * fresh PostgreSQL started for the measure (fsync on). The WAL is read from the LSN before and
 * after, then broken down with pg_walinspect by record type and by relation, with the share of
 * full-page images; the CPU is the utime + stime of every postgres process (/proc), exited
 * backends included. Each handoff's life is counted until it is over: every delivery sent, stamped
 * for the feed, and its callback posted and recorded.
 *
 *   npm run bench:wal                        both configurations, two handoffs each
 *   WAL_CONFIG=project|stock npm run bench:wal   one of them
 *   WAL_N=10000 WAL_HANDOFFS=2               recipients per handoff, handoffs per database
 *   WAL_CALLBACKS=off                        the life without a callback
 *   WAL_STATEMENTS=1                         each statement's time and WAL (pg_stat_statements)
 *   WAL_SETTINGS=name=value,...              more PostgreSQL settings
 *   WAL_WARMUP=n, WAL_FRESH_ENS=1, WAL_NODE_ARGS='...'   the first handoff's experiments (below)
 *
 * "project" is PostgreSQL as ENS starts it itself (local-engines' settings); "stock" turns those
 * off again (wal_compression off, the default checkpoint spacing), as a PostgreSQL 15 an operator
 * installs and leaves alone. The bench's `wal` phase runs the same (run.ts).
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startNats, startPostgres } from '@ens/local-engines';
import { startReceiver } from './callbacks.ts';
import { installSignalHandlers, onCleanup, runCleanup } from './cleanup.ts';
import { createClient, ensEnv, mintToken, provisionTenant, startEns } from './ens.ts';
import { ensPool, handoffBody, handoffId, phones, postHandoff } from './http.ts';
import { progress, sleep, wallMs } from './log.ts';

/** PostgreSQL 15's own defaults for what local-engines sets: the "stock" configuration. */
export const STOCK_SETTINGS = {
  wal_compression: 'off',
  checkpoint_timeout: '5min',
  max_wal_size: '1GB',
} as const;

export type WalConfig = 'project' | 'stock';

export interface WalBreakdownRow {
  name: string;
  records: number;
  /** Record bytes including their full-page images. */
  bytes: number;
  fpiBytes: number;
}

export interface WalHandoff {
  n: number;
  /** From the POST to the last callback recorded. */
  ms: number;
  walBytes: number;
  pgCpuSeconds: number;
  /** CPU of the ENS process (all roles) over the same handoff. */
  ensCpuSeconds: number;
  /** Of pgCpuSeconds, what the backends of each ENS pool used (by application_name). */
  pgCpuByPool: Record<string, number>;
}

export interface WalMeasure {
  config: WalConfig;
  callbacks: boolean;
  settings: Record<string, string>;
  handoffs: WalHandoff[];
  deliveries: number;
  walBytes: number;
  fpiBytes: number;
  pgCpuSeconds: number;
  byRecord: WalBreakdownRow[];
  byRelation: WalBreakdownRow[];
  /** With WAL_STATEMENTS=1: what each statement cost over the handoffs (pg_stat_statements). */
  statements: StatementCost[];
}

export interface StatementCost {
  query: string;
  calls: number;
  /** Rows the statement returned or changed, over all its calls. */
  rows: number;
  /** Execution plus planning time, ms. */
  ms: number;
  /** Planning time alone, ms (counted with pg_stat_statements.track_planning on, as WAL_STATEMENTS sets it). */
  planMs: number;
  walBytes: number;
}

/** WAL_STATEMENTS=1: load pg_stat_statements and show each statement's time and WAL. */
function statementsWanted(): boolean {
  return process.env.WAL_STATEMENTS === '1';
}

/**
 * Every statement's calls, time and WAL since the reset, most time first (its first 90 characters).
 * Time is the statement's execution, waits for locks included (the outcome waits for the feed
 * clock's row lock while the other outcome batch in flight holds it), so it is not CPU.
 */
async function statementCosts(db: pg.Pool): Promise<StatementCost[]> {
  const { rows } = await db.query<StatementCost>(
    `SELECT left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 90) AS query, calls::float8 AS calls, rows::float8 AS rows,
            (total_exec_time + total_plan_time)::float8 AS ms, total_plan_time::float8 AS "planMs", wal_bytes::float8 AS "walBytes"
       FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY total_exec_time + total_plan_time DESC`,
  );
  return rows;
}

const CLK_TCK = 100;

/** WAL_SETTINGS=name=value,...: more server settings, for experiments (checkpoint spacing, ...). */
function extraSettings(): Record<string, string> {
  const list = process.env.WAL_SETTINGS?.split(',').filter(Boolean) ?? [];
  return Object.fromEntries(
    list.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

/** The fields of a /proc/<pid>/stat after the command name (which may hold spaces). */
const statFields = (stat: string): string[] => stat.slice(stat.lastIndexOf(')') + 2).split(' ');

/** A process's own CPU seconds (utime + stime) from its stat fields. */
const ownCpuSeconds = (f: string[]): number => (Number(f[11]) + Number(f[12])) / CLK_TCK;

/** CPU seconds of a process and its descendants, exited (reaped) ones included. */
async function treeCpuSeconds(root: number): Promise<number> {
  const pids = (await readdir('/proc')).filter((n) => /^\d+$/.test(n));
  const stats = await Promise.all(
    pids.map((p) => readFile(`/proc/${p}/stat`, 'utf8').catch(() => null)),
  );
  const kids = new Map<number, { pid: number; own: number; reaped: number }[]>();
  const byPid = new Map<number, { pid: number; own: number; reaped: number }>();
  for (const s of stats) {
    if (!s) continue;
    const pid = Number(s.slice(0, s.indexOf(' ')));
    const f = statFields(s);
    const p = {
      pid,
      own: ownCpuSeconds(f),
      reaped: (Number(f[13]) + Number(f[14])) / CLK_TCK,
    };
    byPid.set(pid, p);
    const ppid = Number(f[1]);
    kids.set(ppid, [...(kids.get(ppid) ?? []), p]);
  }
  let sum = 0;
  const stack = [byPid.get(root)].filter((p) => p !== undefined);
  while (stack.length) {
    const p = stack.pop()!;
    sum += p.own + p.reaped;
    stack.push(...(kids.get(p.pid) ?? []));
  }
  return sum;
}

/*
 * What each ENS pool's backends carry, for the CPU split (runtime.ts names the pools): the
 * outcomes and the feed's stamps, the claims and the callbacks' records, the rest.
 */
const POOLS: Record<string, string> = {
  'ens-keyed': 'outcomes and stamps',
  'ens-leases': 'claims and callback records',
  ens: 'accepts, reads and jobs',
};

/** CPU seconds so far of each ENS pool's backends, per pid (pg_stat_activity's application_name). */
async function poolBackendsCpu(db: pg.Pool): Promise<Map<number, { pool: string; cpu: number }>> {
  const { rows } = await db.query<{ pid: number; pool: string }>(
    `SELECT pid, application_name AS pool FROM pg_stat_activity
      WHERE backend_type = 'client backend' AND application_name = ANY($1::text[])`,
    [Object.keys(POOLS)],
  );
  const out = new Map<number, { pool: string; cpu: number }>();
  for (const r of rows) {
    const s = await readFile(`/proc/${r.pid}/stat`, 'utf8').catch(() => null);
    if (!s) continue;
    out.set(r.pid, { pool: r.pool, cpu: ownCpuSeconds(statFields(s)) });
  }
  return out;
}

/**
 * Each pool's CPU between two snapshots: a backend that connected meanwhile counts whole; one that
 * went (a pool closing an idle connection) is lost to the split, and stays in the total.
 */
function poolCpuDelta(
  before: Map<number, { pool: string; cpu: number }>,
  after: Map<number, { pool: string; cpu: number }>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [pid, a] of after)
    out[a.pool] = (out[a.pool] ?? 0) + a.cpu - (before.get(pid)?.cpu ?? 0);
  return out;
}

/** "ens-keyed (outcomes and stamps) 0.052 ms, ...": each pool's share per delivery, then the rest. */
function formatPoolCpu(h: Pick<WalHandoff, 'n' | 'pgCpuSeconds' | 'pgCpuByPool'>): string {
  const pools = Object.keys(POOLS).map(
    (p) => `${p} (${POOLS[p]}) ${(((h.pgCpuByPool[p] ?? 0) / h.n) * 1000).toFixed(3)} ms`,
  );
  const rest = h.pgCpuSeconds - Object.values(h.pgCpuByPool).reduce((a, b) => a + b, 0);
  return `${pools.join(', ')}, the rest ${((rest / h.n) * 1000).toFixed(3)} ms`;
}

async function lsn(db: pg.Pool): Promise<string> {
  return (await db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
}

/** Waits until nothing of the handoff is left to do: sent, stamped, called back. */
async function waitOver(db: pg.Pool, handoff: string, timeoutMs = 300_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const { rows } = await db.query<{ busy: boolean }>(
      `SELECT EXISTS (SELECT FROM deliveries WHERE handoff_id = $1 AND (status = 'pending' OR stamp_pending))
           OR EXISTS (SELECT FROM callbacks WHERE status = 'pending') AS busy`,
      [handoff],
    );
    if (!rows[0]!.busy) return;
    if (Date.now() - t0 > timeoutMs) throw new Error(`handoff ${handoff} not over after 300 s`);
    await sleep(100);
  }
}

/**
 * Record bytes grouped by resource manager/record type, and by the relation of the record's first
 * block (indexes named as such; records without a block, commits for instance, under "-").
 */
async function breakdown(
  db: pg.Pool,
  from: string,
  to: string,
): Promise<{ byRecord: WalBreakdownRow[]; byRelation: WalBreakdownRow[] }> {
  const byRecord = await db.query<WalBreakdownRow>(
    `SELECT "resource_manager/record_type" AS name, count::int AS records,
            combined_size::float8 AS bytes, fpi_size::float8 AS "fpiBytes"
       FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, per_record => true)
      WHERE count > 0 ORDER BY combined_size DESC`,
    [from, to],
  );
  const byRelation = await db.query<WalBreakdownRow>(
    `SELECT coalesce(c.relname, w.rel, '-') || ' ' || w.kind AS name, count(*)::int AS records,
            sum(w.record_length)::float8 AS bytes, sum(w.fpi_length)::float8 AS "fpiBytes"
       FROM (SELECT record_length, fpi_length, resource_manager || '/' || record_type AS kind,
                    substring(block_ref from 'rel \\d+/\\d+/(\\d+)') AS rel
               FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)) w
       LEFT JOIN pg_class c ON c.relfilenode::text = w.rel
      GROUP BY 1 ORDER BY 3 DESC`,
    [from, to],
  );
  return { byRecord: byRecord.rows, byRelation: byRelation.rows };
}

/**
 * One configuration: a fresh PostgreSQL and NATS, an all-roles ENS (from source), a callback
 * receiver, then `handoffs` handoffs of `n` sms recipients each, one after the other.
 */
export async function measureWal(o: {
  config: WalConfig;
  n: number;
  handoffs: number;
  /** With a callback_url on every handoff (the default) or without: the life the issue's 3.7–3.9 KB counted. */
  callbacks?: boolean;
}): Promise<WalMeasure> {
  const callbacks = o.callbacks ?? true;
  const root = await mkdtemp(path.join(os.tmpdir(), `ens-wal-${o.config}-`));
  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    await rm(root, { recursive: true, force: true });
  };
  const undo = onCleanup(`wal measure ${o.config}`, cleanup);
  try {
    const { chmod, mkdir } = await import('node:fs/promises');
    await chmod(root, 0o755);
    await mkdir(path.join(root, 'nats'));
    const postgres = await startPostgres({
      dataDir: path.join(root, 'pg'),
      fsync: true,
      settings: {
        ...(o.config === 'stock' ? STOCK_SETTINGS : {}),
        ...(statementsWanted()
          ? {
              shared_preload_libraries: 'pg_stat_statements',
              'pg_stat_statements.track_planning': 'on',
            }
          : {}),
        ...extraSettings(),
      },
    });
    cleanups.push(() => postgres.stop());
    const nats = await startNats({ storeDir: path.join(root, 'nats') });
    cleanups.push(() => nats.stop());
    const db = new pg.Pool({ connectionString: postgres.url, max: 2, application_name: 'wal' });
    db.on('error', () => {});
    cleanups.push(() => db.end());
    await db.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    if (statementsWanted()) await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const settings = Object.fromEntries(
      (
        await db.query<{ name: string; setting: string }>(
          `SELECT name, setting || coalesce(unit, '') AS setting FROM pg_settings
            WHERE name IN ('wal_compression', 'synchronous_commit', 'checkpoint_timeout', 'max_wal_size', 'full_page_writes',
                           'fsync', 'shared_buffers', 'server_version')`,
        )
      ).rows.map((r) => [r.name, r.setting]),
    );
    const env = ensEnv({
      databaseUrl: postgres.url,
      natsUrl: nats.url,
      dataDir: path.join(root, 'ens'),
    });
    // WAL_NODE_ARGS: more node flags for ENS, for experiments (V8's heap sizing, ...).
    const fromSource = [
      '--conditions=ens-source',
      '--import=tsx',
      ...(process.env.WAL_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    ];
    let ens = await startEns({ name: `wal-${o.config}`, env, nodeArgs: fromSource });
    cleanups.push(() => ens.stop());
    const client = await createClient(env, 'wal', fromSource);
    const token = await mintToken(ens.baseUrl, client);
    await provisionTenant(ens.baseUrl, token, 'bench');
    const receiver = await startReceiver();
    cleanups.push(() => receiver.stop());
    let http = ensPool(ens.baseUrl, 1);
    cleanups.push(() => http.close());
    const handoff = async (recipients: string[]) => {
      const { done } = callbacks
        ? await receiver.expect(recipients.length)
        : { done: Promise.resolve() };
      const body = handoffBody(recipients, {
        eventType: 'wal',
        ...(callbacks ? { callbackUrl: receiver.url } : {}),
      });
      const id = handoffId(await postHandoff(http.pool, token, body));
      await done;
      await waitOver(db, id);
    };
    // Experiments on the first handoff's extra cost (issue 27): WAL_WARMUP=n sends n recipients
    // first, unmeasured, so the first measured handoff meets a warm ENS on a nearly empty record;
    // WAL_FRESH_ENS=1 starts a new ENS process before every handoff, so each meets a cold ENS.
    const warmup = Number(process.env.WAL_WARMUP ?? 0);
    if (warmup > 0) await handoff(phones(warmup, 10_000_000));
    const freshEns = process.env.WAL_FRESH_ENS === '1';
    // Settle: the migrations' and the start's writes, and a checkpoint, are not the deliveries'.
    await db.query('CHECKPOINT');
    await sleep(1_000);

    if (statementsWanted()) await db.query('SELECT pg_stat_statements_reset()');
    const startLsn = await lsn(db);
    const handoffs: WalHandoff[] = [];
    for (let h = 0; h < o.handoffs; h++) {
      if (freshEns && h > 0) {
        await http.close();
        await ens.stop();
        ens = await startEns({ name: `wal-${o.config}`, env, nodeArgs: fromSource });
        http = ensPool(ens.baseUrl, 1);
        await sleep(1_000);
      }
      const lsn0 = await lsn(db);
      const cpu0 = await treeCpuSeconds(postgres.pid!);
      const pools0 = await poolBackendsCpu(db);
      const ensCpu0 = await treeCpuSeconds(ens.pid);
      const t0 = wallMs();
      await handoff(phones(o.n, h * o.n));
      const ms = wallMs() - t0;
      const cpu1 = await treeCpuSeconds(postgres.pid!);
      const pgCpuByPool = poolCpuDelta(pools0, await poolBackendsCpu(db));
      const ensCpu = (await treeCpuSeconds(ens.pid)) - ensCpu0;
      const lsn1 = await lsn(db);
      const walBytes = Number(
        (await db.query<{ d: string }>('SELECT pg_wal_lsn_diff($1, $2)::text AS d', [lsn1, lsn0]))
          .rows[0]!.d,
      );
      const done: WalHandoff = {
        n: o.n,
        ms,
        walBytes,
        pgCpuSeconds: cpu1 - cpu0,
        ensCpuSeconds: ensCpu,
        pgCpuByPool,
      };
      handoffs.push(done);
      progress(
        `wal ${o.config}: handoff ${h + 1}: ${(walBytes / o.n / 1024).toFixed(2)} KB WAL and ` +
          `${(((cpu1 - cpu0) / o.n) * 1000).toFixed(3)} ms PostgreSQL CPU per delivery, ${(ms / 1000).toFixed(1)} s ` +
          `(ENS ${((ensCpu / o.n) * 1000).toFixed(3)} ms CPU per delivery); PostgreSQL by pool: ${formatPoolCpu(done)}`,
      );
    }
    const endLsn = await lsn(db);
    // pg_walinspect reads only flushed WAL; the WAL writer flushes within wal_writer_delay.
    for (let i = 0; i < 50; i++) {
      const { rows } = await db.query<{ ok: boolean }>(
        'SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS ok',
        [endLsn],
      );
      if (rows[0]!.ok) break;
      await sleep(100);
    }
    // Read before the breakdown, whose own statements are not the deliveries'.
    const statements = statementsWanted() ? await statementCosts(db) : [];
    const { byRecord, byRelation } = await breakdown(db, startLsn, endLsn);
    const deliveries = o.n * o.handoffs;
    return {
      config: o.config,
      callbacks,
      settings,
      handoffs,
      deliveries,
      walBytes: handoffs.reduce((a, h) => a + h.walBytes, 0),
      fpiBytes: byRecord.reduce((a, r) => a + r.fpiBytes, 0),
      pgCpuSeconds: handoffs.reduce((a, h) => a + h.pgCpuSeconds, 0),
      byRecord,
      byRelation,
      statements,
    };
  } finally {
    await undo();
  }
}

/** Each pool's CPU over all of a measure's handoffs. */
function poolCpuOfRun(m: WalMeasure): Record<string, number> {
  const byPool: Record<string, number> = {};
  for (const h of m.handoffs)
    for (const [p, s] of Object.entries(h.pgCpuByPool)) byPool[p] = (byPool[p] ?? 0) + s;
  return byPool;
}

const kb = (bytes: number, n: number) => (bytes / n / 1024).toFixed(2);

/** A Markdown account of one measure: totals, per handoff, and the two breakdowns (top rows). */
export function formatWal(m: WalMeasure, top = Number(process.env.WAL_TOP ?? 25)): string {
  const n = m.deliveries;
  const table = (title: string, rows: WalBreakdownRow[]) => [
    `| ${title} | records/delivery | bytes/delivery | of which FPI | share |`,
    '| --- | --- | --- | --- | --- |',
    ...rows
      .slice(0, top)
      .map(
        (r) =>
          `| ${r.name} | ${(r.records / n).toFixed(2)} | ${(r.bytes / n).toFixed(0)} | ${(r.fpiBytes / n).toFixed(0)} | ${((100 * r.bytes) / m.walBytes).toFixed(1)} % |`,
      ),
  ];
  return [
    `**${m.config}, callbacks ${m.callbacks ? 'on' : 'off'}** (${Object.entries(m.settings)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}): ${m.handoffs.length} × ${m.handoffs[0]?.n ?? 0} deliveries, ` +
      `**${kb(m.walBytes, n)} KB WAL/delivery** (full-page images ${((100 * m.fpiBytes) / m.walBytes).toFixed(1)} %), ` +
      `**${((m.pgCpuSeconds / n) * 1000).toFixed(3)} ms PostgreSQL CPU/delivery**; per handoff: ` +
      m.handoffs
        .map(
          (h) =>
            `${kb(h.walBytes, h.n)} KB, ${((h.pgCpuSeconds / h.n) * 1000).toFixed(3)} ms, ${(h.ms / 1000).toFixed(1)} s (ENS ${((h.ensCpuSeconds / h.n) * 1000).toFixed(3)} ms)`,
        )
        .join('; '),
    '',
    `PostgreSQL CPU per delivery by ENS pool, all handoffs: ${formatPoolCpu({ n: m.deliveries, pgCpuSeconds: m.pgCpuSeconds, pgCpuByPool: poolCpuOfRun(m) })}`,
    '',
    ...table('record type', m.byRecord),
    '',
    ...table('relation (first block) and record type', m.byRelation),
    ...(m.statements.length === 0
      ? []
      : [
          '',
          '| statement (pg_stat_statements) | calls/delivery | rows/call | µs/delivery (of which planning) | WAL bytes/delivery |',
          '| --- | --- | --- | --- | --- |',
          ...m.statements
            .slice(0, top)
            .map(
              (r) =>
                `| \`${r.query.replaceAll('|', '\\|')}\` | ${(r.calls / n).toFixed(3)} | ${(r.rows / r.calls).toFixed(1)} | ${((r.ms * 1000) / n).toFixed(1)} (${((r.planMs * 1000) / n).toFixed(1)}) | ${(r.walBytes / n).toFixed(0)} |`,
            ),
        ]),
  ].join('\n');
}

async function main(): Promise<void> {
  installSignalHandlers();
  const configs = (process.env.WAL_CONFIG ?? 'project,stock').split(',') as WalConfig[];
  const n = Number(process.env.WAL_N ?? 10_000);
  const handoffs = Number(process.env.WAL_HANDOFFS ?? 2);
  const callbacks = (process.env.WAL_CALLBACKS ?? 'on') !== 'off';
  const out: string[] = [];
  try {
    for (const config of configs) {
      if (config !== 'project' && config !== 'stock')
        throw new Error(`WAL_CONFIG: ${config} is neither project nor stock`);
      const m = await measureWal({ config, n, handoffs, callbacks });
      out.push(formatWal(m));
    }
  } finally {
    await runCleanup();
  }
  process.stdout.write(`${out.join('\n\n')}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      progress(`wal FAILED: ${(err as Error).stack ?? String(err)}`);
      process.exit(1);
    },
  );
}
