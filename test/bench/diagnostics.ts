import { readdir, readFile } from 'node:fs/promises';
import type pg from 'pg';
import { Pool } from 'undici';

/**
 * What was using the machine during a measurement, so a figure can be read against the noise and
 * a miss can be placed: CPU seconds per process group (from /proc), the wait states of ENS's
 * PostgreSQL sessions (sampled from pg_stat_activity), and ENS's event-loop delay (its /metrics).
 */

const CLK_TCK = 100; // USER_HZ on Linux

interface ProcStat {
  pid: number;
  ppid: number;
  cpuSeconds: number;
  /**
   * CPU of its children that exited and were reaped (PostgreSQL backends of closed connections).
   */
  reapedSeconds: number;
}

async function readProcStat(pid: number): Promise<ProcStat | null> {
  try {
    const s = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: state ppid ... utime(14) stime(15) cutime(16)
    // cstime(17)
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return {
      pid,
      ppid: Number(rest[1]),
      cpuSeconds: (Number(rest[11]) + Number(rest[12])) / CLK_TCK,
      reapedSeconds: (Number(rest[13]) + Number(rest[14])) / CLK_TCK,
    };
  } catch {
    return null;
  }
}

async function allProcs(): Promise<ProcStat[]> {
  const pids = (await readdir('/proc')).filter((n) => /^\d+$/.test(n)).map(Number);
  return (await Promise.all(pids.map(readProcStat))).filter((p): p is ProcStat => p !== null);
}

async function machineBusySeconds(): Promise<{ busy: number; total: number }> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: (total - idle) / CLK_TCK, total: total / CLK_TCK };
}

/** Process groups to account for: these pids, and with `tree` all their descendants too. */
export type Groups = Record<string, { pids: number[]; tree?: boolean }>;

interface CpuSnapshot {
  at: number;
  groups: Record<string, number>;
  machine: { busy: number; total: number };
}

async function cpuSnapshot(groups: Groups): Promise<CpuSnapshot> {
  const procs = await allProcs();
  const children = new Map<number, ProcStat[]>();
  for (const p of procs) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  const out: Record<string, number> = {};
  for (const [name, g] of Object.entries(groups)) {
    let sum = 0;
    const stack = g.pids.map((r) => byPid.get(r)).filter((p): p is ProcStat => p !== undefined);
    const seen = new Set<number>();
    while (stack.length) {
      const p = stack.pop()!;
      if (seen.has(p.pid)) continue;
      seen.add(p.pid);
      sum += p.cpuSeconds;
      // In a tree, a child's time moves into its parent's reaped time when it exits: count both.
      if (g.tree) {
        sum += p.reapedSeconds;
        stack.push(...(children.get(p.pid) ?? []));
      }
    }
    out[name] = sum;
  }
  return { at: Date.now(), groups: out, machine: await machineBusySeconds() };
}

export interface Diagnosis {
  seconds: number;
  /** Percent of one core per group, "others" = everything else busy on the machine. */
  cpuPct: Record<string, number>;
  /** CPU seconds used per group over the window. */
  cpuSeconds: Record<string, number>;
  machineCores: number;
  /** Share of sampled ENS PostgreSQL sessions in each state, in percent. */
  pgWaits: Record<string, number>;
  /** ENS event-loop delay over the window (prom-client's default metrics, reset at each scrape). */
  ensLoopDelayMs: { p50: number; p99: number; max: number } | null;
  /**
   * ENS's accepts over the window, from its /metrics: the mean time of a 202 from its first hook to
   * its answer, and the batch statements its accepts went in (handoffs in each, mean time of one).
   */
  ensAccepts: {
    requests: number;
    requestMs: number;
    batches: number;
    handoffsPerBatch: number;
    batchMs: number;
  } | null;
  /**
   * PostgreSQL WAL written and transaction ids assigned (= transactions that wrote) over the
   * window.
   */
  pg: { walBytes: number; writeTransactions: number } | null;
}

async function pgCounters(db: pg.Pool | undefined): Promise<{ lsn: string; xid: string } | null> {
  if (!db) return null;
  try {
    const { rows } = await db.query<{ lsn: string; xid: string }>(
      'SELECT pg_current_wal_lsn()::text AS lsn, pg_snapshot_xmax(pg_current_snapshot())::text ' +
        'AS xid',
    );
    return rows[0] ?? null;
  } catch {
    return null;
  }
}

async function pgDelta(
  db: pg.Pool | undefined,
  before: { lsn: string; xid: string } | null,
): Promise<Diagnosis['pg']> {
  const after = await pgCounters(db);
  if (!db || !before || !after) return null;
  const { rows } = await db.query<{ wal: string }>(
    'SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS wal',
    [after.lsn, before.lsn],
  );
  return {
    walBytes: Number(rows[0]!.wal),
    writeTransactions: Number(after.xid) - Number(before.xid),
  };
}

async function scrapeMetrics(baseUrl: string | undefined): Promise<string | null> {
  if (!baseUrl) return null;
  const pool = new Pool(baseUrl, { connections: 1 });
  try {
    const res = await pool.request({ method: 'GET', path: '/metrics' });
    return await res.body.text();
  } catch {
    return null;
  } finally {
    await pool.destroy().catch(() => {});
  }
}

function loopDelay(text: string | null): Diagnosis['ensLoopDelayMs'] {
  if (text === null) return null;
  const metric = (name: string) => {
    const m = new RegExp(`^ens_nodejs_eventloop_lag_${name}_seconds\\s+([0-9.eE+-]+)`, 'm').exec(
      text,
    );
    return m ? Number(m[1]) * 1000 : Number.NaN;
  };
  return { p50: metric('p50'), p99: metric('p99'), max: metric('max') };
}

/** A sample's value on /metrics: the first line of `name` whose labels include every one given. */
function sample(text: string, name: string, labels: string[] = []): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || !/[ {]/.test(line[name.length] ?? '')) continue;
    if (labels.every((l) => line.includes(l))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

/** The accept's counters on /metrics: 202s of POST /v2/messages and the batches they went in. */
function acceptCounters(text: string | null) {
  if (text === null) return null;
  const accepted = ['method="POST"', 'route="/v2/messages"', 'status="202"'];
  return {
    requests: sample(text, 'ens_http_request_duration_seconds_count', accepted),
    requestSeconds: sample(text, 'ens_http_request_duration_seconds_sum', accepted),
    batches: sample(text, 'ens_accept_batch_handoffs_count'),
    handoffs: sample(text, 'ens_accept_batch_handoffs_sum'),
    batchSeconds: sample(text, 'ens_accept_batch_duration_seconds_sum'),
  };
}

function acceptDelta(
  before: ReturnType<typeof acceptCounters>,
  after: ReturnType<typeof acceptCounters>,
): Diagnosis['ensAccepts'] {
  if (!before || !after) return null;
  const requests = after.requests - before.requests;
  const batches = after.batches - before.batches;
  if (requests <= 0 || batches <= 0) return null;
  return {
    requests,
    requestMs: ((after.requestSeconds - before.requestSeconds) * 1000) / requests,
    batches,
    handoffsPerBatch: (after.handoffs - before.handoffs) / batches,
    batchMs: ((after.batchSeconds - before.batchSeconds) * 1000) / batches,
  };
}

/**
 * Starts watching; stop() returns what happened in between. `ensBaseUrl` (an ENS with the api role)
 * is scraped at both ends so the event-loop figures cover exactly this window.
 */
export async function watch(o: {
  groups: Groups;
  /** Samples ENS's sessions in pg_stat_activity when given. */
  db?: pg.Pool;
  /** Reads WAL position and the transaction counter at both ends. */
  statsDb?: pg.Pool;
  ensBaseUrl?: string;
  sampleEveryMs?: number;
}): Promise<{ stop(): Promise<Diagnosis> }> {
  // The scrape resets the event-loop histogram; the accept's counters are read at both ends.
  const acceptsBefore = acceptCounters(await scrapeMetrics(o.ensBaseUrl));
  const pgBefore = await pgCounters(o.statsDb);
  const before = await cpuSnapshot(o.groups);
  const waits = new Map<string, number>();
  let samples = 0;
  let sampling = false;
  const timer = o.db
    ? setInterval(() => {
        if (sampling) return;
        sampling = true;
        o.db!.query<{ w: string; n: number }>(
          `SELECT CASE WHEN state = 'active' AND wait_event IS NULL THEN 'running (or waiting for CPU)'
                         WHEN state = 'idle' THEN 'idle (in ENS''s pool or between queries)'
                         WHEN state LIKE 'idle in transaction%' THEN 'in a transaction, waiting for ENS'
                         WHEN wait_event_type = 'Lock' THEN 'Lock/' || wait_event || ' in "' || left(regexp_replace(query, '\\s+', ' ', 'g'), 50) || '"'
                         ELSE wait_event_type || '/' || wait_event END AS w, count(*)::int AS n
               FROM pg_stat_activity WHERE application_name = 'ens' AND backend_type = 'client backend' AND query NOT LIKE 'LISTEN%'
              GROUP BY 1`,
        )
          .then(({ rows }) => {
            samples++;
            for (const r of rows) waits.set(r.w, (waits.get(r.w) ?? 0) + r.n);
          })
          .catch(() => {})
          .finally(() => (sampling = false));
      }, o.sampleEveryMs ?? 100)
    : undefined;
  return {
    async stop() {
      clearInterval(timer);
      const after = await cpuSnapshot(o.groups);
      const pgd = await pgDelta(o.statsDb, pgBefore);
      const text = await scrapeMetrics(o.ensBaseUrl);
      const loop = loopDelay(text);
      const accepts = acceptDelta(acceptsBefore, acceptCounters(text));
      const seconds = (after.at - before.at) / 1000;
      const cpuPct: Record<string, number> = {};
      const cpuSeconds: Record<string, number> = {};
      let accounted = 0;
      for (const name of Object.keys(o.groups)) {
        const used = (after.groups[name] ?? 0) - (before.groups[name] ?? 0);
        accounted += used;
        cpuSeconds[name] = Number(used.toFixed(2));
        cpuPct[name] = Math.round((100 * used) / seconds);
      }
      cpuPct.others = Math.max(
        0,
        Math.round((100 * (after.machine.busy - before.machine.busy - accounted)) / seconds),
      );
      const totalSessions = [...waits.values()].reduce((a, b) => a + b, 0);
      const pgWaits = Object.fromEntries(
        [...waits.entries()]
          .sort((a, b) => b[1] - a[1])
          .map(([k, n]) => [k, Math.round((100 * n) / Math.max(1, totalSessions))]),
      );
      const cores = Math.round((after.machine.total - before.machine.total) / seconds) || 1;
      void samples;
      return {
        seconds,
        cpuPct,
        cpuSeconds,
        machineCores: cores,
        pgWaits,
        ensLoopDelayMs: loop,
        ensAccepts: accepts,
        pg: pgd,
      };
    },
  };
}

export function formatDiagnosis(d: Diagnosis): string {
  const cpu = Object.entries(d.cpuPct)
    .map(([k, v]) => `${k} ${v}%`)
    .join(', ');
  const waits = Object.entries(d.pgWaits)
    .slice(0, 5)
    .map(([k, v]) => `${v}% ${k}`)
    .join(', ');
  const loop = d.ensLoopDelayMs
    ? `; ENS event-loop delay p50 ${d.ensLoopDelayMs.p50.toFixed(1)} / p99 ${d.ensLoopDelayMs.p99.toFixed(1)} / max ${d.ensLoopDelayMs.max.toFixed(1)} ms`
    : '';
  const pgw = d.pg
    ? `; PostgreSQL wrote ${(d.pg.walBytes / 1048576).toFixed(1)} MB of WAL in ${d.pg.writeTransactions} write transactions`
    : '';
  const a = d.ensAccepts;
  const accepts = a
    ? `; in ENS a 202 took ${a.requestMs.toFixed(1)} ms from its first hook to its answer, its accept batch ${a.batchMs.toFixed(1)} ms (${a.batches} batches, ${a.handoffsPerBatch.toFixed(1)} handoffs each)`
    : '';
  return `CPU (% of one core, ${d.machineCores} cores = ${d.machineCores * 100}%): ${cpu}${pgw}${waits ? `; ENS's PostgreSQL sessions: ${waits}` : ''}${loop}${accepts}`;
}

/** CPU milliseconds per operation for each process group (others excluded: not ours). */
export function cpuPerOp(d: Diagnosis, ops: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, sec] of Object.entries(d.cpuSeconds))
    out[k] = Number(((sec * 1000) / Math.max(1, ops)).toFixed(3));
  return out;
}

export function formatCpuPerOp(perOp: Record<string, number>, skip: string[] = []): string {
  const parts = Object.entries(perOp).filter(([k]) => !skip.includes(k));
  const total = parts.reduce((a, [, v]) => a + v, 0);
  return `${total.toFixed(2)} ms (${parts.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')})`;
}

export function totalCpuPerOp(d: Diagnosis, ops: number, skip: string[] = []): number {
  return Object.entries(cpuPerOp(d, ops))
    .filter(([k]) => !skip.includes(k))
    .reduce((a, [, v]) => a + v, 0);
}

/** WAL bytes and write transactions per operation, e.g. "1.2 KB WAL, 3.1 write tx". */
export function formatPgPerOp(d: Diagnosis, ops: number): string {
  if (!d.pg) return 'n/a';
  return `${(d.pg.walBytes / Math.max(1, ops) / 1024).toFixed(1)} KB WAL, ${(d.pg.writeTransactions / Math.max(1, ops)).toFixed(2)} write tx`;
}
