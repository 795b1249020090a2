/**
 * `npm run bench`: measures ENS against the raw engines it runs on (DESIGN.md, Targets), in one run
 * on one machine, and reports every figure as a ratio against the raw engine measured in that run.
 *
 * Environment:
 *   BENCH_ONLY=accept,memory,pipeline,suppressions,fanout,fairness,callbacks,feed,scaling,peers,wal  run a subset (default: all)
 *   BENCH_SUPPRESSIONS=1000000  suppressions phase: entries in the suppressed tenant's list
 *   BENCH_FEED_ROWS=1000000   deliveries in the feed phase (inserting a million takes a while)
 *   BENCH_MEMORY_SECONDS=20  length of the sustained load in the memory phase
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379  the Redis of the BullMQ peer (peers phase; skipped when unreachable)
 *   BENCH_GROWTH_ROWS=1000000  peers phase: also time ENS's 10,000 handoff after its record is topped up
 *                             to this many delivered rows by bulk SQL (default: not run)
 *   BENCH_PEER_RUNS=5         peers phase: runs of each pipeline measure (ENS's and each peer's); the median counts
 *   BENCH_ACCEPT_PAIRS=5      accept phase: alternating pairs of Fastify + pg and ENS's api role alone; the median ratio counts
 *   BENCH_ACCEPT_CONCURRENCY=32  accept phase: requests in flight in its closed loops (the target row counts at 32 only)
 *   BENCH_CALLBACKS_N=15000   callbacks phase: posts per run (raw loop and ENS)
 *   BENCH_CPU_PROF=1          run the ENS children with --cpu-prof into test/bench/profiles/<stamp>/
 *                             and print a self-time summary of each profile at the end
 *   BENCH_ENGINE_LOGS=1       show PostgreSQL and NATS output
 *
 * The table goes to stdout, progress to stderr, everything measured to test/bench/last-run.json.
 * Exit status: 0 when every phase ran (targets missed or not: the table says which), 1 when a phase
 * failed.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, statfs } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { ensAccept, ensAcceptLatency, rawAccept } from './accept.ts';
import type { LoadResult } from './load.ts';
import {
  ensCallbacksEndToEnd,
  ensCallbacksIsolated,
  rawCallbacks,
  startReceiver,
  type Receiver,
} from './callbacks.ts';
import { installSignalHandlers, isAborted, onCleanup, runCleanup } from './cleanup.ts';
import {
  cpuPerOp,
  formatCpuPerOp,
  formatDiagnosis,
  formatPgPerOp,
  totalCpuPerOp,
  watch,
  type Diagnosis,
} from './diagnostics.ts';
import { backlog, waitIdle } from './drain.ts';
import { startEngines } from './engines.ts';
import {
  allChildren,
  createClient,
  ensEnv,
  mintToken,
  provisionTenant,
  startEns,
  type EnsChild,
} from './ens.ts';
import { fillFeed, timeFeedPages } from './feed.ts';
import { ensFanout } from './fanout.ts';
import {
  blastWithSingles,
  clearRecord,
  pacedSends,
  sharesUnderBacklogs,
  startLimitedTwilio,
  type Sender,
} from './fairness.ts';
import { elapsedMs, progress } from './log.ts';
import { memoryUnderLoad } from './memory.ts';
import { fastifyPgAccept, runPeersPhase } from './peers/phase.ts';
import { createPeersDatabase } from './peers/schema.ts';
import { ensPipeline, rawPipeline } from './pipeline.ts';
import { formatProfile, summariseProfiles, type ProfileSummary } from './profile.ts';
import { fmt, ms, outcomesText, Report } from './report.ts';
import { median, medianOf, summarise } from './stats.ts';
import { formatWal, measureWal, type WalMeasure } from './wal.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TMPFS_MAGIC = 0x01021994;
const PHASES = [
  'accept',
  'memory',
  'pipeline',
  'suppressions',
  'fanout',
  'fairness',
  'callbacks',
  'feed',
  'scaling',
  'peers',
  'wal',
] as const;
type Phase = (typeof PHASES)[number];

/** The accept phase's concurrency, where issue 27 set its target; another one is a probe. */
const ACCEPT_TARGET_CONCURRENCY = 32;
const ACCEPT = {
  concurrency: Number(process.env.BENCH_ACCEPT_CONCURRENCY ?? ACCEPT_TARGET_CONCURRENCY),
  warmupMs: 2_000,
  durationMs: 8_000,
};
const ACCEPT_PAIRS = Number(process.env.BENCH_ACCEPT_PAIRS ?? 5);
const MEMORY = {
  concurrency: 32,
  warmupMs: 2_000,
  durationMs: 1000 * Number(process.env.BENCH_MEMORY_SECONDS ?? 20),
  heapCheckMs: 10_000,
};
const PIPELINE_N = 5_000;
const PIPELINE_HANDOFFS = 50;
const FANOUT_N = 10_000;
const FAIR = {
  handoffs: 5,
  perHandoff: 10_000,
  singleEveryMs: 100,
  backlogs: [30_000, 20_000, 10_000],
  pace: 50,
  paced: 1_000,
};
/**
 * Posts per callbacks run. 3,000 drained in about a second, most of it a freshly started process
 * warming its JIT, and the raw loop in under 200 ms: both figures were mostly noise.
 */
const CALLBACKS_N = Number(process.env.BENCH_CALLBACKS_N ?? 15_000);
/**
 * The raw pipeline and callbacks loops take about a second: each runs this many times, median kept.
 */
const RAW_REPEATS = 3;

/**
 * Resident memory of an `ens serve` and each process it supervises, in MB (the supervisor first).
 */
async function treeRssMb(pid: number): Promise<number[]> {
  const out = await new Promise<string>((resolve) =>
    execFile('ps', ['-o', 'pid=,ppid=,rss=', '-A'], (_e, o) => resolve(String(o))),
  );
  const rows = out
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number))
    .filter((r) => r.length === 3);
  return rows
    .filter(([p, pp]) => p === pid || pp === pid)
    .sort((a, b) => (a[0] === pid ? -1 : b[0] === pid ? 1 : a[0]! - b[0]!))
    .map((r) => r[2]! / 1024);
}

/**
 * A multi-process `ens serve` answers /readyz as soon as its first process listens: wait until all
 * `n` processes run, and a moment more for the last to listen.
 */
async function allProcessesUp(pid: number, n: number): Promise<void> {
  if (n <= 1) return;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const children = await new Promise<number>((resolve) =>
      execFile('pgrep', ['-P', String(pid), '-f', 'serve --roles'], (_e, out) =>
        resolve(String(out).split('\n').filter(Boolean).length),
      ),
    );
    if (children >= n) break;
    if (Date.now() > deadline)
      throw new Error(`ENS_PROCESSES=${n}: only ${children} processes after 60 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await new Promise((r) => setTimeout(r, 3_000));
}

function selectedPhases(): Set<Phase> {
  const only = process.env.BENCH_ONLY?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!only || only.length === 0) return new Set(PHASES);
  const bad = only.filter((p) => !(PHASES as readonly string[]).includes(p));
  if (bad.length)
    throw new Error(`BENCH_ONLY: unknown phase ${bad.join(', ')}; phases are ${PHASES.join(', ')}`);
  return new Set(only as Phase[]);
}

/** Stops the bench before it starts when a setting is not an integer of at least `min`. */
function checkInteger(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min)
    throw new Error(`${name} must be ${min === 1 ? 'a positive integer' : `an integer ≥ ${min}`}`);
}

async function main(): Promise<number> {
  installSignalHandlers();
  const phases = selectedPhases();
  checkInteger('BENCH_ACCEPT_PAIRS', ACCEPT_PAIRS, 1);
  checkInteger('BENCH_ACCEPT_CONCURRENCY', ACCEPT.concurrency, 1);
  const feedRows = Number(process.env.BENCH_FEED_ROWS ?? 1_000_000);
  checkInteger('BENCH_FEED_ROWS', feedRows, 2_000);
  checkInteger('BENCH_CALLBACKS_N', CALLBACKS_N, 100);
  const peerRuns = Number(process.env.BENCH_PEER_RUNS ?? 5);
  checkInteger('BENCH_PEER_RUNS', peerRuns, 1);
  const profiling = process.env.BENCH_CPU_PROF === '1';
  const growthRows = process.env.BENCH_GROWTH_ROWS
    ? Number(process.env.BENCH_GROWTH_ROWS)
    : undefined;
  if (growthRows !== undefined) checkInteger('BENCH_GROWTH_ROWS', growthRows, 50_000);
  const startedAt = new Date();
  const loadStart = os.loadavg();
  const report = new Report();
  let failures = 0;
  const phase = async (name: string, fn: () => Promise<void>) => {
    if (isAborted()) return;
    progress(`── ${name}`);
    try {
      await fn();
    } catch (err) {
      failures++;
      progress(`${name} FAILED: ${(err as Error).stack ?? String(err)}`);
      report.failed(name, err);
    }
  };

  const root = await mkdtemp(path.join(os.tmpdir(), 'ens-bench-'));
  onCleanup('temp dir', () => rm(root, { recursive: true, force: true }));
  const profDir = profiling
    ? path.join(HERE, 'profiles', startedAt.toISOString().replace(/[:.]/g, '-'))
    : undefined;
  if (profDir) await mkdir(profDir, { recursive: true });
  let profiles: ProfileSummary[] = [];
  let header: string[] = [];

  try {
    const engines = await startEngines(root);
    const db = new pg.Pool({
      connectionString: engines.databaseUrl,
      max: 4,
      application_name: 'bench',
    });
    db.on('error', () => {}); // an idle connection losing its server (Ctrl-C) is not a failure of the run
    onCleanup('bench db pool', () => db.end());
    const env = ensEnv({
      databaseUrl: engines.databaseUrl,
      natsUrl: engines.natsUrl,
      dataDir: path.join(root, 'ens-data'),
    });
    // The main child writes a heap snapshot on SIGUSR2 (the memory phase measures its live heap
    // that way).
    const snapshotDir = path.join(root, 'heap-snapshots');
    await mkdir(snapshotDir, { recursive: true });
    // extraEnv: the hook for runs of another ENS deployment (e.g. a multi-process `ens serve`).
    const startMain = (name: string, extraEnv: Record<string, string> = {}) =>
      startEns({
        name,
        env: { ...env, ...extraEnv },
        snapshotDir,
        ...(profDir ? { profDir } : {}),
      });
    let api: EnsChild = await startMain('main');
    const client = await createClient(env);
    const token = await mintToken(api.baseUrl, client);
    await provisionTenant(api.baseUrl, token, 'bench');
    progress(`client ${client.clientId} and tenant "bench" ready`);
    let receiver: Receiver | undefined;
    /**
     * Watches CPU per process group, ENS's PostgreSQL sessions and (with the api role) its event
     * loop.
     */
    const diag = (
      ensPid: number = api.pid,
      ensBaseUrl: string | undefined = api.baseUrl,
      ensSessions = true,
    ) =>
      watch({
        groups: {
          // The whole tree: with ENS_PROCESSES > 1 the work is done by the serve's child processes.
          ENS: { pids: [ensPid], tree: true },
          PostgreSQL: { pids: [engines.postgres.pid!], tree: true },
          NATS: { pids: [engines.nats.pid!] },
          bench: { pids: [process.pid, ...(receiver ? [receiver.pid] : [])] },
        },
        ...(ensSessions ? { db } : {}),
        statsDb: db,
        ...(ensBaseUrl ? { ensBaseUrl } : {}),
      });
    /** Runs fn while watching; records the diagnosis under `label` and returns it too. */
    const watched = async <T>(label: string, fn: () => Promise<T>): Promise<[T, Diagnosis]> => {
      // Raw baselines leave ENS idle: its sessions are not sampled then.
      const w = await diag(api.pid, api.baseUrl, !label.includes(', raw '));
      const out = await fn();
      const d = await w.stop();
      report.diag(label, formatDiagnosis(d), d);
      return [out, d];
    };
    const RAW_SKIP = ['ENS', 'NATS'];
    const recordDiag = (label: string, d: Diagnosis | undefined) =>
      d && report.diag(label, formatDiagnosis(d), d);
    header = [
      `ENS bench — ${startedAt.toISOString()} — ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}`,
      `Engines: ${engines.versions}; data in ${root} (${(await statfs(root)).type === TMPFS_MAGIC ? 'tmpfs: fsync costs nothing there!' : 'on disk'}); ` +
        `PostgreSQL fsync ON for raw and ENS alike; NATS JetStream file store with its defaults (no fsync per message)`,
      `ENS: node bin/ens.mjs serve (built code) as a child process, all roles unless noted; ENS_LOG_LEVEL=warn, rate limits lifted${profiling ? '; CPU profiling ON (slows ENS)' : ''}`,
    ];

    // ── 1. Accept ───────────────────────────────────────────────────────────────────────────────
    if (phases.has('accept')) {
      await phase('accept', async () => {
        progress(
          `accept: raw PostgreSQL, ${ACCEPT.concurrency} connections looping BEGIN; INSERT; COMMIT (${ACCEPT.warmupMs / 1000} s warm-up + ${ACCEPT.durationMs / 1000} s)`,
        );
        const [raw, rawDiag] = await watched('accept, raw PostgreSQL', () =>
          rawAccept(engines.databaseUrl, ACCEPT),
        );
        progress(`accept: raw ${fmt(raw.rate)} rows/s`);
        progress(
          `accept: ENS, ${ACCEPT.concurrency} concurrent POST /v2/messages (1 sms recipient each)`,
        );
        const [ens, ensDiag] = await watched('accept, ENS', () =>
          ensAccept(api.baseUrl, token, ACCEPT),
        );
        const atEnd = await backlog(db);
        progress(
          `accept: ENS ${fmt(ens.rate)} req/s (202); non-202: ${outcomesText(ens.outcomes, '202')}; backlog when the load stopped: ${atEnd.pendingDeliveries} deliveries pending`,
        );
        const drain1 = await waitIdle(db, 'accept');
        report.ratioRow(
          `Accept: POST /v2/messages vs INSERT tx (C=${ACCEPT.concurrency})`,
          raw.rate,
          ens.rate,
          '/s',
          0.5,
        );
        const closedLat = summarise(ens.latenciesMs);
        report.note(
          `Accept (closed loop, C=${ACCEPT.concurrency}, ${ACCEPT.durationMs / 1000} s after ${ACCEPT.warmupMs / 1000} s warm-up): raw ${raw.ok} commits, ENS ${ens.ok} × 202; ` +
            `ENS non-202: ${outcomesText(ens.outcomes, '202')}. ENS latency at saturation p50 ${fmt(closedLat.p50)} ms, p99 ${fmt(closedLat.p99)} ms. ` +
            `The worker/feed roles in the same process were sending meanwhile; ${atEnd.pendingDeliveries} deliveries were still pending when the load stopped and took ${ms(drain1.ms)} to drain. ` +
            `CPU per request (from /proc, warm-up included): raw ${formatCpuPerOp(cpuPerOp(rawDiag, raw.okTotal), RAW_SKIP)}; ENS ${formatCpuPerOp(cpuPerOp(ensDiag, ens.okTotal))}, ` +
            `i.e. ${(totalCpuPerOp(ensDiag, ens.okTotal) / totalCpuPerOp(rawDiag, raw.okTotal, RAW_SKIP)).toFixed(1)}× the raw CPU per request (ENS's includes sending it). ` +
            `PostgreSQL per request: raw ${formatPgPerOp(rawDiag, raw.okTotal)}; ENS ${formatPgPerOp(ensDiag, ens.okTotal)}.`,
        );

        const half = raw.rate / 2;
        const reduced = ens.rate < half;
        const rate = Math.max(10, reduced ? 0.9 * ens.rate : half);
        const why = reduced
          ? `90% of ENS's own closed-loop maximum (${fmt(ens.rate)}/s), because ENS cannot sustain half the raw rate (${fmt(half)}/s)`
          : `half the raw rate`;
        progress(`accept latency: open loop at ${fmt(rate)} req/s (${why})`);
        const [lat] = await watched(`accept latency, ENS at ${fmt(rate)}/s`, () =>
          ensAcceptLatency(api.baseUrl, token, rate, {
            warmupMs: ACCEPT.warmupMs,
            durationMs: ACCEPT.durationMs,
          }),
        );
        const s = summarise(lat.latenciesMs);
        const afterLat = await backlog(db);
        const drain2 = await waitIdle(db, 'accept latency');
        report.row({
          measure: `Accept latency @ ${fmt(rate)}/s offered${reduced ? ' (REDUCED)' : ''}`,
          raw: `(raw/2 = ${fmt(half)}/s)`,
          ens: `p50 ${fmt(s.p50)} ms, p99 ${fmt(s.p99)} ms`,
          ratio: '',
          target: 'p99 < 50 ms at raw/2',
          met: reduced ? 'NO' : s.p99 < 50 ? 'yes' : 'NO',
        });
        report.note(
          `Accept latency: open loop at ${fmt(rate)} req/s = ${why}; latency measured from each request's scheduled send time over ${ACCEPT.durationMs / 1000} s after a ${ACCEPT.warmupMs / 1000} s warm-up; ` +
            `achieved ${fmt(lat.rate)} × 202/s, p50 ${fmt(s.p50)} / p90 ${fmt(s.p90)} / p99 ${fmt(s.p99)} / max ${fmt(s.max)} ms over ${s.n} requests; non-202: ${outcomesText(lat.outcomes, '202')}` +
            `${lat.skipped ? `; generator skipped ${lat.skipped}` : ''}; backlog at the end ${afterLat.pendingDeliveries} pending (drained in ${ms(drain2.ms)}).` +
            (reduced
              ? ' The p99 target is marked NO because it could not be tested at the rate it names.'
              : ''),
        );
        // The same load against an ENS running only the api role: what accepting costs without the
        // worker and feed roles sending in the same process. Its backlog is sent afterwards.
        progress(
          'accept: ENS with the api role alone (worker, callbacks, feed stopped): restarting ENS',
        );
        await api.stop();
        // The minimal Fastify + pg service of the peers phase, under the same load with nothing
        // else running: the anchor the api role alone is read against.
        const peersUrl = await createPeersDatabase(engines.databaseUrl);
        const peersDb = new pg.Pool({
          connectionString: peersUrl,
          max: 1,
          application_name: 'bench-peers',
        });
        peersDb.on('error', () => {});
        // Issue 27 decided the accept target: the api role alone against this service, median of
        // ACCEPT_PAIRS alternating pairs, each ENS run on an emptied record (the service's table
        // is new for each of its runs too); the last run's deliveries are sent afterwards.
        api = await startEns({
          name: 'api-only',
          env,
          roles: ['api'],
          ...(profDir ? { profDir } : {}),
        });
        const pairs: {
          fp: LoadResult;
          fpDiag: Diagnosis;
          solo: LoadResult;
          soloDiag: Diagnosis;
        }[] = [];
        try {
          for (let i = 1; i <= ACCEPT_PAIRS; i++) {
            progress(
              `accept: pair ${i}/${ACCEPT_PAIRS}: Fastify + pg, the same load on POST /messages`,
            );
            const [fp, fpDiag] = await fastifyPgAccept(engines, db, peersUrl, peersDb, ACCEPT);
            report.diag(`accept, Fastify + pg (pair ${i})`, formatDiagnosis(fpDiag), fpDiag);
            await clearRecord(db);
            const [solo, soloDiag] = await watched(`accept, ENS api role alone (pair ${i})`, () =>
              ensAccept(api.baseUrl, token, ACCEPT),
            );
            progress(
              `accept: pair ${i}/${ACCEPT_PAIRS}: Fastify + pg ${fmt(fp.rate)} req/s, ENS api role alone ${fmt(solo.rate)} req/s (${(solo.rate / fp.rate).toFixed(2)}); non-202: ${outcomesText(fp.outcomes, '202')}, ${outcomesText(solo.outcomes, '202')}`,
            );
            pairs.push({ fp, fpDiag, solo, soloDiag });
          }
        } finally {
          await peersDb.end();
        }
        const ratios = pairs.map((p) => p.solo.rate / p.fp.rate);
        // The median pair (the lower middle one of an even count).
        const midIndex = ratios.map((r, i) => [r, i] as const).sort((a, b) => a[0] - b[0])[
          Math.floor((ratios.length - 1) / 2)
        ]![1];
        const { fp, fpDiag, solo, soloDiag } = pairs[midIndex]!;
        await api.stop();
        api = await startMain('main-2');
        const drain3 = await waitIdle(db, 'accept (api role alone)');
        report.row({
          measure: `Accept, api role alone (C=${ACCEPT.concurrency})`,
          raw: `${fmt(raw.rate)} /s`,
          ens: `${fmt(solo.rate)} /s`,
          ratio: (solo.rate / raw.rate).toFixed(2),
          target: 'info (serve runs all roles)',
          met: 'info',
        });
        const ratio = ratios[midIndex]!;
        report.row({
          measure: `Accept, api role alone vs Fastify+pg (C=${ACCEPT.concurrency}, median of ${pairs.length} pairs)`,
          raw: `${fmt(fp.rate)} /s`,
          ens: `${fmt(solo.rate)} /s`,
          ratio: ratio.toFixed(2),
          target: `ratio ≥ 0.90, median of 5 pairs, C=${ACCEPT_TARGET_CONCURRENCY}`,
          met:
            pairs.length < 5 || ACCEPT.concurrency !== ACCEPT_TARGET_CONCURRENCY
              ? 'info'
              : ratio >= 0.9
                ? 'yes'
                : 'NO',
        });
        report.note(
          `Accept, api role alone: the same closed loop against \`ens serve --roles api\` (nothing sent meanwhile; each ENS run on an emptied record, the last one's ${pairs[pairs.length - 1]!.solo.okTotal} deliveries sent afterwards by a restarted all-roles ENS in ${ms(drain3.ms)}). ` +
            `Non-202: ${outcomesText(solo.outcomes, '202')}; p50 ${fmt(summarise(solo.latenciesMs).p50)} ms, p99 ${fmt(summarise(solo.latenciesMs).p99)} ms. ` +
            `CPU per request ${formatCpuPerOp(cpuPerOp(soloDiag, solo.okTotal))}; PostgreSQL per request ${formatPgPerOp(soloDiag, solo.okTotal)}. ` +
            (soloDiag.ensAccepts
              ? `Where a request's time went (ENS's /metrics, means): ${fmt(soloDiag.ensAccepts.requestMs)} ms in ENS from its first hook to its 202, of which ${fmt(soloDiag.ensAccepts.batchMs)} ms its accept batch (${soloDiag.ensAccepts.handoffsPerBatch.toFixed(1)} handoffs a statement); the rest of the client's p50 is the way there and back and the wait for ENS's event loop. `
              : '') +
            `Against it, the peers phase's Fastify + pg service run just before with nothing else running: ${fmt(fp.rate)} req/s (non-202: ${outcomesText(fp.outcomes, '202')}), ` +
            `CPU per request ${formatCpuPerOp(cpuPerOp(fpDiag, fp.okTotal))}. These figures are the median pair's; ` +
            `the pairs (Fastify + pg, ENS api role alone, ratio): ${pairs.map((p, i) => `${fmt(p.fp.rate)}, ${fmt(p.solo.rate)}, ${ratios[i]!.toFixed(2)}`).join('; ')}.`,
        );
        report.data.acceptApiOnly = {
          ...solo,
          latenciesMs: undefined,
          latency: summarise(solo.latenciesMs),
          drainMs: drain3.ms,
          fastifyPg: { ...fp, latenciesMs: undefined },
        };
        report.data.accept = {
          settings: ACCEPT,
          raw: { ...raw, latenciesMs: undefined, latency: summarise(raw.latenciesMs) },
          ens: { ...ens, latenciesMs: undefined, latency: closedLat },
          backlogAtEnd: atEnd,
          drainMs: drain1.ms,
          latency: {
            offeredRate: rate,
            reduced,
            why,
            achievedRate: lat.rate,
            outcomes: lat.outcomes,
            skipped: lat.skipped,
            ms: s,
            backlogAtEnd: afterLat,
            drainMs: drain2.ms,
          },
        };
      });
    }

    // ── 6. Memory (right after accept: same load shape, same child) ─────────────────────────────
    if (phases.has('memory')) {
      await phase('memory', async () => {
        progress(
          `memory: ${MEMORY.warmupMs / 1000} s warm-up, then ${MEMORY.durationMs / 1000} s of closed-loop accept load (C=${MEMORY.concurrency}), VmRSS of pid ${api.pid} every second`,
        );
        const [m] = await watched('memory, ENS', () =>
          memoryUnderLoad(api, token, {
            ...MEMORY,
            ...(api.snapshotDir ? { snapshotDir: api.snapshotDir } : {}),
            waitIdle: () => waitIdle(db, 'memory'),
          }),
        );
        const drain = await waitIdle(db, 'memory');
        const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;
        const LIMIT = 100;
        const lh = m.liveHeap;
        report.row({
          measure: `Memory: live heap, idle, before/after ${lh ? fmt(lh.requests) : '?'} more requests`,
          raw: '',
          ens: lh
            ? `${(lh.beforeKb / 1024).toFixed(1)} → ${(lh.afterKb / 1024).toFixed(1)} MB (${fmt(lh.bytesPerRequest)} B/req)`
            : 'not measured',
          ratio: '',
          target: `growth < ${LIMIT} B/request`,
          met: lh ? (lh.bytesPerRequest < LIMIT ? 'yes' : 'NO') : 'FAILED',
        });
        report.row({
          measure: `Memory: RSS during ${MEMORY.durationMs / 1000} s of load`,
          raw: '',
          ens: `${mb(m.startKb)} → ${mb(m.endKb)} (max ${mb(m.maxKb)}), ${fmt(m.kbPer1000)} KB/1k req`,
          ratio: '',
          target: 'info (see note)',
          met: 'info',
        });
        const heapUsed = m.samples
          .map((x) => x.heapUsedKb)
          .filter((v): v is number => v !== undefined && Number.isFinite(v));
        const heapTotal = m.samples
          .map((x) => x.heapTotalKb)
          .filter((v): v is number => v !== undefined && Number.isFinite(v));
        report.note(
          `Memory: ${m.samples.length} VmRSS samples, 1 s apart, over ${fmt(m.requests)} requests at ${fmt(m.rate)} × 202/s (non-202: ${outcomesText(m.non202, '202')}); RSS slope = least-squares fit over requests served. ` +
            `Over a window this short RSS mostly follows V8 growing its heap before the next full GC (heapTotal ${heapTotal.length ? `${mb(heapTotal[0]!)} → ${mb(heapTotal[heapTotal.length - 1]!)}` : 'n/a'}, ` +
            `heapUsed ${heapUsed.length ? `${mb(Math.min(...heapUsed))}–${mb(Math.max(...heapUsed))}` : 'n/a'} from /metrics), so it cannot tell garbage from a leak. ` +
            `The verdict therefore uses the live heap from heap snapshots (each forces a full GC) of the idle process after that window and again after ${MEMORY.heapCheckMs / 1000} s more of the same load ` +
            `(snapshots come last because taking one inflates RSS for good, and pause ENS ~1 s, which shows as event-loop delay): ` +
            `growth per request under ${LIMIT} bytes is this bench's criterion for "no growth per request" (DESIGN.md gives no number; JIT code still being compiled counts against it). Backlog drained in ${ms(drain.ms)}.`,
        );
        report.data.memory = { settings: MEMORY, ...m, drainMs: drain.ms };
      });
    }

    // ── 2. Pipeline ─────────────────────────────────────────────────────────────────────────────
    if (phases.has('pipeline')) {
      await phase('pipeline', async () => {
        await waitIdle(db, 'pipeline');
        progress(
          `pipeline: raw JetStream work queue, ${PIPELINE_N} messages published (512 in flight) and consumed/acked, ${RAW_REPEATS} runs`,
        );
        const [raw, rawDiag] = await watched('pipeline, raw JetStream', () =>
          medianOf(RAW_REPEATS, () => rawPipeline(engines.natsUrl, PIPELINE_N)),
        );
        progress(
          `pipeline: raw ${raw.runs.map((r) => fmt(r)).join(', ')} msgs/s; median ${fmt(raw.rate)}`,
        );
        const per = PIPELINE_N / PIPELINE_HANDOFFS;
        progress(
          `pipeline: ENS, ${PIPELINE_HANDOFFS} handoffs × ${per} sms recipients → sent (sandbox)`,
        );
        const [ens, ensDiag] = await watched('pipeline, ENS', () =>
          ensPipeline(api.baseUrl, token, db, PIPELINE_HANDOFFS, per),
        );
        progress(
          `pipeline: ENS ${fmt(ens.rate)} deliveries/s (${ms(ens.ms)}; all 202s after ${ms(ens.acceptMs)})`,
        );
        report.ratioRow(
          `Pipeline: accepted → sent (N=${PIPELINE_N})`,
          raw.rate,
          ens.rate,
          '/s',
          0.4,
        );
        report.note(
          `Pipeline: raw = ${PIPELINE_N} JetStream messages, first publish → last ack, median of ${RAW_REPEATS} runs (${raw.runs.map((r) => fmt(r)).join(', ')} msgs/s; median run ${ms(raw.ms)}). ENS = ${ens.handoffs} handoffs × ${per} recipients POSTed 8 at a time, ` +
            `first POST → no delivery pending (polled every 20 ms) ${ms(ens.ms)}, of which accepting took ${ms(ens.acceptMs)}; final statuses ${JSON.stringify(ens.statuses)}` +
            `${Object.keys(ens.non202).length ? `; non-202 ${JSON.stringify(ens.non202)}` : ''}. ` +
            `CPU per message: raw ${formatCpuPerOp(cpuPerOp(rawDiag, raw.n * RAW_REPEATS), ['ENS', 'PostgreSQL'])}; ENS per delivery ${formatCpuPerOp(cpuPerOp(ensDiag, ens.n))}; ` +
            `PostgreSQL per delivery ${formatPgPerOp(ensDiag, ens.n)}.`,
        );
        report.data.pipeline = { raw, ens };
      });
    }

    // ── 2b. The pipeline with a large suppression list ───────────────────────────────────────────
    if (phases.has('suppressions')) {
      await phase('suppressions', async () => {
        const entries = Number(process.env.BENCH_SUPPRESSIONS ?? 1_000_000);
        if (!Number.isInteger(entries) || entries < 1 || entries > 1_000_000)
          throw new Error('BENCH_SUPPRESSIONS must be an integer from 1 to 1000000');
        await provisionTenant(api.baseUrl, token, 'bench-suppressed');
        progress(
          `suppressions: ${entries.toLocaleString('en-US')} entries into tenant "bench-suppressed" (none match the pipeline's numbers)`,
        );
        const t0 = performance.now();
        // Numbers among the pipeline's own (+1 555 ppp ssss with ssss of 3000..9999, see phone()),
        // ending in 1000..1999, so none matches a send yet every look-up walks the same part of the
        // index as a real list would.
        await db.query(
          `INSERT INTO suppressions (client_id, tenant, channel, address, reason, source)
           SELECT $1, 'bench-suppressed', 'sms', '+1555' || lpad((g / 1000)::text, 3, '0') || (1000 + g % 1000)::text, 'manual', 'import'
             FROM generate_series(0, $2::int - 1) g ON CONFLICT DO NOTHING`,
          [client.clientId, entries],
        );
        await db.query('ANALYZE suppressions');
        progress(`suppressions: list filled in ${ms(performance.now() - t0)}`);
        const per = PIPELINE_N / PIPELINE_HANDOFFS;
        const pairs = 5;
        const none: number[] = [];
        const million: number[] = [];
        // Alternating runs, so that the record growing under them slows both sides alike.
        for (let i = 0; i < pairs; i++) {
          await waitIdle(db, 'suppressions');
          const a = await ensPipeline(
            api.baseUrl,
            token,
            db,
            PIPELINE_HANDOFFS,
            per,
            'suppressions-none',
            'bench',
          );
          await waitIdle(db, 'suppressions');
          const b = await ensPipeline(
            api.baseUrl,
            token,
            db,
            PIPELINE_HANDOFFS,
            per,
            'suppressions-list',
            'bench-suppressed',
          );
          none.push(a.rate);
          million.push(b.rate);
          progress(
            `suppressions: pair ${i + 1}: no list ${fmt(a.rate)}/s, ${entries.toLocaleString('en-US')} entries ${fmt(b.rate)}/s`,
          );
        }
        report.ratioRow(
          `Pipeline with ${entries.toLocaleString('en-US')} suppressions vs none`,
          median(none),
          median(million),
          '/s',
          0.97,
        );
        report.note(
          `Suppressions: ${pairs} alternating pairs of the pipeline (${PIPELINE_HANDOFFS} handoffs × ${per} sms), one tenant with an empty suppression list and one with ` +
            `${entries.toLocaleString('en-US')} entries (none matching, so every delivery is sent and each claim looks its address up). ` +
            `No list: ${none.map(fmt).join(', ')}/s; with the list: ${million.map(fmt).join(', ')}/s; medians compared.`,
        );
        report.data.suppressions = { entries, none, million };
      });
    }

    // ── 3. Fan-out ──────────────────────────────────────────────────────────────────────────────
    if (phases.has('fanout')) {
      await phase('fanout', async () => {
        await waitIdle(db, 'fan-out');
        progress(`fan-out: one handoff with ${FANOUT_N} sms recipients`);
        const [f] = await watched('fan-out, ENS', () =>
          ensFanout(api.baseUrl, token, db, FANOUT_N),
        );
        progress(`fan-out: 202 after ${ms(f.acceptMs)}, all sent after ${ms(f.allSentMs)}`);
        report.row({
          measure: `Fan-out: ${FANOUT_N} recipients, POST → 202`,
          raw: '',
          ens: ms(f.acceptMs),
          ratio: '',
          target: '< 1 s',
          met: f.acceptMs < 1000 ? 'yes' : 'NO',
        });
        report.row({
          measure: `Fan-out: POST → all ${FANOUT_N} sent`,
          raw: '',
          ens: `${ms(f.allSentMs)} (${fmt(f.sendRate)} sent/s)`,
          ratio: '',
          target: '"soon after" (no number)',
          met: 'info',
        });
        report.note(
          `Fan-out: request body ${fmt(f.bodyBytes / 1024)} KiB; final statuses ${JSON.stringify(f.statuses)}.`,
        );
        report.data.fanout = f;
      });
    }

    // ── 3b. Fair delivery ───────────────────────────────────────────────────────────────────────
    if (phases.has('fairness')) {
      await phase('fairness', async () => {
        await waitIdle(db, 'fairness');
        const sender = async (name: string): Promise<Sender> => {
          const c = await createClient(env, name);
          const tk = await mintToken(api.baseUrl, c);
          await provisionTenant(api.baseUrl, tk, name);
          return { clientId: c.clientId, token: tk, tenant: name };
        };
        const [marketing, bank] = [await sender('marketing'), await sender('bank')];
        const blastN = FAIR.handoffs * FAIR.perHandoff;
        const blast = {
          handoffs: FAIR.handoffs,
          perHandoff: FAIR.perHandoff,
          everyMs: FAIR.singleEveryMs,
        };
        // The worker's window as before fair delivery: 4 wake-ups per send slot (256 for 64 slots),
        // so it chooses among those only. With the two lanes a single is not behind the blast's
        // wake-ups even then; what the big window adds is fairness among backlogs it holds.
        progress(
          `fairness: ${FAIR.handoffs} × ${FAIR.perHandoff} sms for "marketing", one sms for "bank" every ${FAIR.singleEveryMs} ms; first with ENS_SEND_WINDOW=256 (what the worker held before)`,
        );
        await api.stop();
        api = await startEns({
          name: 'window-256',
          env: { ...env, ENS_SEND_WINDOW: '256' },
          ...(profDir ? { profDir } : {}),
        });
        await clearRecord(db);
        const before = await blastWithSingles(api.baseUrl, db, marketing, bank, {
          ...blast,
          offset: 0,
        });
        progress(
          `fairness: window 256: blast ${fmt(before.blastRate)}/s; singles p50 ${fmt(before.singles.p50)} ms, p99 ${fmt(before.singles.p99)} ms`,
        );
        await api.stop();
        api = await startMain('main-fair');
        await clearRecord(db);
        // RSS while the worker holds the blast's wake-ups: what the fair window costs in memory.
        const fairChild = api;
        const idleRssKb = await fairChild.rssKb();
        let peakRssKb = idleRssKb;
        const rssTimer = setInterval(
          () =>
            void fairChild.rssKb().then(
              (kb) => (peakRssKb = Math.max(peakRssKb, kb)),
              () => {},
            ),
          200,
        );
        const [fair, fairDiag] = await watched('fairness: blast with singles, ENS', () =>
          blastWithSingles(api.baseUrl, db, marketing, bank, { ...blast, offset: 100_000 }),
        ).finally(() => clearInterval(rssTimer));
        progress(
          `fairness: default window: blast ${fmt(fair.blastRate)}/s; singles p50 ${fmt(fair.singles.p50)} ms, p99 ${fmt(fair.singles.p99)} ms`,
        );
        report.row({
          measure: `Fair: another tenant's sms during a ${fmt(blastN)} blast, 202 → sent`,
          raw: `p99 ${ms(before.singles.p99)} (window 256)`,
          ens: `p50 ${ms(fair.singles.p50)}, p99 ${ms(fair.singles.p99)}`,
          ratio: '',
          target: 'p99 ≤ 1 s',
          met: fair.singles.p99 <= 1000 ? 'yes' : 'NO',
        });
        // The same with the worker in a process of its own, as a deployment that scales would run
        // it: the API's accepting of the blast no longer shares the worker's event loop.
        await api.stop();
        api = await startEns({
          name: 'fair-api',
          env,
          roles: ['api', 'callbacks', 'feed'],
          ...(profDir ? { profDir } : {}),
        });
        const splitWorker = await startEns({
          name: 'fair-worker',
          env,
          roles: ['worker'],
          ...(profDir ? { profDir } : {}),
        });
        await clearRecord(db);
        const split = await blastWithSingles(api.baseUrl, db, marketing, bank, {
          ...blast,
          offset: 200_000,
        });
        await splitWorker.stop();
        await api.stop();
        api = await startMain('main-fair-2');
        progress(
          `fairness: worker in its own process: blast ${fmt(split.blastRate)}/s; singles p50 ${fmt(split.singles.p50)} ms, p99 ${fmt(split.singles.p99)} ms`,
        );
        report.row({
          measure: `Fair: the same, api and worker in separate processes`,
          raw: '',
          ens: `p50 ${ms(split.singles.p50)}, p99 ${ms(split.singles.p99)}`,
          ratio: '',
          target: 'p99 ≤ 1 s',
          met: split.singles.p99 <= 1000 ? 'yes' : 'NO',
        });
        report.row({
          measure: `Fair: the blast's own rate, vs window 256`,
          raw: `${fmt(before.blastRate)} /s`,
          ens: `${fmt(fair.blastRate)} /s`,
          ratio: (fair.blastRate / before.blastRate).toFixed(2),
          target: 'ratio ≥ 0.90',
          met: fair.blastRate / before.blastRate >= 0.9 ? 'yes' : 'NO',
        });

        const others = [await sender('x'), await sender('y'), await sender('z')];
        progress(
          `fairness: three clients with backlogs of ${FAIR.backlogs.map(fmt).join(', ')} sms at once`,
        );
        await clearRecord(db);
        const shares = await sharesUnderBacklogs(api.baseUrl, db, others, FAIR.backlogs, 300_000);
        const worst = Math.max(...shares.perClient.map((c) => Math.abs(c.ofFairShare - 1)));
        report.row({
          measure: `Fair: 3 clients, backlogs ${FAIR.backlogs.map((b) => `${b / 1000}k`).join('/')}, share while all have work`,
          raw: '',
          ens: shares.perClient.map((c) => `${(c.ofFairShare * 100).toFixed(1)} %`).join(', '),
          ratio: '',
          target: 'each within 10 % of 1/3',
          met: worst <= 0.1 ? 'yes' : 'NO',
        });

        progress(
          `fairness: a provider that refuses more than ${FAIR.pace} sends in any second (fake Twilio), paced by ENS_PROVIDER_PACE, two worker processes, ${FAIR.paced} sms`,
        );
        const twilio = await startLimitedTwilio(FAIR.pace);
        onCleanup('fake twilio', () => twilio.fake.stop());
        const pacedEnv = {
          ...env,
          ENS_PROVIDERS: 'sms=@ens/plugin-twilio',
          ENS_PROVIDER_CONFIG: JSON.stringify({
            '@ens/plugin-twilio': {
              accountSid: twilio.fake.accountSid,
              authToken: twilio.fake.authToken,
              from: '+15005550006',
              baseUrl: twilio.baseUrl,
            },
          }),
          ENS_PROVIDER_PACE: `@ens/plugin-twilio=${FAIR.pace}`,
        };
        await api.stop();
        api = await startEns({ name: 'paced', env: pacedEnv, ...(profDir ? { profDir } : {}) });
        const secondWorker = await startEns({
          name: 'paced-worker-2',
          env: pacedEnv,
          roles: ['worker'],
          ...(profDir ? { profDir } : {}),
        });
        const paced = await pacedSends(
          api.baseUrl,
          db,
          marketing,
          twilio.fake,
          FAIR.paced,
          2_000_000,
        );
        await secondWorker.stop();
        await api.stop();
        await twilio.fake.stop();
        api = await startMain('main-3');
        progress(
          `fairness: paced ${fmt(paced.rate)} sends/s, ${paced.refusedForRate} refused for rate`,
        );
        report.row({
          measure: `Pace: provider limited to ${FAIR.pace}/s, 2 worker processes, ${fmt(FAIR.paced)} sms`,
          raw: `${FAIR.pace} /s`,
          ens: `${fmt(paced.rate)} /s, ${paced.refusedForRate} refused`,
          ratio: (paced.rate / FAIR.pace).toFixed(3),
          target: 'within 5 %, 0 refused',
          met:
            Math.abs(paced.rate / FAIR.pace - 1) <= 0.05 && paced.refusedForRate === 0
              ? 'yes'
              : 'NO',
        });
        report.note(
          `Fair delivery: each run starts from an empty delivery record (the pipeline slows as the record grows, so runs compared on different records would differ for that reason alone). "marketing" posts ${FAIR.handoffs} handoffs of ${fmt(FAIR.perHandoff)} sms at once; "bank" posts one sms every ${FAIR.singleEveryMs} ms until the blast has drained ` +
            `(${before.singlesSent} and ${fair.singlesSent} singles); a single's latency is its row's created_at → sent_at. Window 256 is ENS_SEND_WINDOW=256, the 4 wake-ups per send slot the worker held before fair delivery, ` +
            `so it picks among those only; the singles' wake-ups are on the other lane of the queue (see Fair delivery), so they are not behind the blast's even then. Singles with window 256: p50 ${ms(before.singles.p50)}, p99 ${ms(before.singles.p99)}, max ${ms(before.singles.max)}; ` +
            `default window: p50 ${ms(fair.singles.p50)}, p90 ${ms(fair.singles.p90)}, p99 ${ms(fair.singles.p99)}, max ${ms(fair.singles.max)}; ` +
            `worker in its own process (roles api,callbacks,feed + worker): p50 ${ms(split.singles.p50)}, p90 ${ms(split.singles.p90)}, p99 ${ms(split.singles.p99)}, blast ${fmt(split.blastRate)}/s. ` +
            `The slowest singles are those sent while the blast is being accepted and its wake-ups read: they share the two cores with that work. ` +
            `CPU per delivery with the default window ${formatCpuPerOp(cpuPerOp(fairDiag, fair.blastDeliveries))}; RSS of the all-roles process ${fmt(idleRssKb / 1024)} MB before the blast, ${fmt(peakRssKb / 1024)} MB at most while it was held and sent. ` +
            `Three clients: ${shares.perClient.map((c, i) => `${['x', 'y', 'z'][i]} (backlog ${fmt(c.backlog)}) ${fmt(c.rate)}/s`).join(', ')} over the ${shares.windowS.toFixed(1)} s in which all three had work. ` +
            `Pace: measured at the fake provider, first to last send accepted; it answers 429 to a send beyond ${FAIR.pace} in any one-second window.`,
        );
        report.data.fairness = {
          settings: FAIR,
          before,
          fair,
          split,
          shares,
          paced,
          idleRssKb,
          peakRssKb,
        };
      });
    }

    // ── 4. Callbacks ────────────────────────────────────────────────────────────────────────────
    if (phases.has('callbacks')) {
      await phase('callbacks', async () => {
        await waitIdle(db, 'callbacks');
        receiver = await startReceiver();
        progress(
          `callbacks: raw undici loop, concurrency 64, ${CALLBACKS_N} posts to the receiver process, ${RAW_REPEATS} runs`,
        );
        const rcv = receiver;
        const [raw, rawDiag] = await watched('callbacks, raw undici', () =>
          medianOf(RAW_REPEATS, () => rawCallbacks(rcv, CALLBACKS_N)),
        );
        progress(
          `callbacks: raw ${raw.runs.map((r) => fmt(r)).join(', ')} posts/s; median ${fmt(raw.rate)}`,
        );

        progress(
          `callbacks: ENS end to end (all roles), ${CALLBACKS_N} deliveries with callback_url`,
        );
        const [e2e] = await watched('callbacks, ENS end to end', () =>
          ensCallbacksEndToEnd(api.baseUrl, token, db, rcv, CALLBACKS_N),
        );
        progress(`callbacks: ENS end to end ${fmt(e2e.rate)} posts/s`);
        await waitIdle(db, 'callbacks');

        // Isolate the callbacks role: an ENS without it queues the callbacks, then a callbacks-only
        // ENS drains them.
        progress(
          'callbacks: stopping the all-roles ENS; starting one without the callbacks role to ' +
            'queue callbacks',
        );
        await api.stop();
        api = await startEns({
          name: 'feeder',
          env,
          roles: ['api', 'worker', 'feed'],
          ...(profDir ? { profDir } : {}),
        });
        const iso = await ensCallbacksIsolated(
          { baseUrl: api.baseUrl, token },
          db,
          rcv,
          CALLBACKS_N,
          { name: 'callbacks-only', env, ...(profDir ? { profDir } : {}) },
          (pid) => diag(pid, undefined),
        );
        recordDiag('callbacks, ENS callbacks role alone', iso.diagnosis);
        progress(`callbacks: ENS callbacks role alone ${fmt(iso.rate)} posts/s`);
        await waitIdle(db, 'callbacks', 30_000);
        // Issue 27 decided: with all roles, callbacks keep up with sends (the gate); 0.3 of the
        // bare loop for the role alone is a stretch row.
        report.row({
          measure: `Callbacks: signed posts, callbacks role alone (N=${CALLBACKS_N})`,
          raw: `${fmt(raw.rate)} /s`,
          ens: `${fmt(iso.rate)} /s`,
          ratio: (iso.rate / raw.rate).toFixed(2),
          target: 'stretch: ratio ≥ 0.30',
          met: 'info',
        });
        const keepsUp = e2e.postRate >= e2e.sendRate;
        report.row({
          measure: `Callbacks keep up with sends, all roles (N=${CALLBACKS_N})`,
          raw: `${fmt(e2e.sendRate)} sends/s`,
          ens: `${fmt(e2e.postRate)} posts/s`,
          ratio: (e2e.postRate / e2e.sendRate).toFixed(2),
          target: 'posts/s ≥ sends/s',
          met: keepsUp ? 'yes' : 'NO',
        });
        report.row({
          measure: `Callbacks: end to end, all roles (N=${CALLBACKS_N})`,
          raw: `${fmt(raw.rate)} /s`,
          ens: `${fmt(e2e.rate)} /s`,
          ratio: (e2e.rate / raw.rate).toFixed(2),
          target: 'info (bounded by the worker)',
          met: 'info',
        });
        report.note(
          `Callbacks: every rate is measured at the receiver (a separate process answering 200), first post received → ${CALLBACKS_N}th. ` +
            `Keeping up (all roles): ${CALLBACKS_N} deliveries sent at ${fmt(e2e.sendRate)}/s (first sent_at → last), their callbacks posted at ${fmt(e2e.postRate)}/s (first received → last); the last callback arrived ${ms(e2e.lagMs)} after the last send. ` +
            `The target row isolates the callbacks role: an ENS without it (roles api,worker,feed) sends ${CALLBACKS_N} deliveries with callback_url until all are sent and ${iso.queued} callbacks are queued; ` +
            `then a callbacks-only ENS starts and drains them (${ms(iso.ms)}; ${ms(iso.fromSpawnMs)} counting its start-up). This measures posting (claim, sign, POST, record) without the worker competing, ` +
            `which "from the first delivery sent" cannot: with all roles in one process the callbacks trail the worker. The end-to-end row is that other figure: ` +
            `first sent_at → ${CALLBACKS_N}th post ${ms(e2e.ms)} (${ms(e2e.fromFirstPostMs)} from the first POST). Raw: ${raw.bodyBytes}-byte body, ` +
            `median of ${RAW_REPEATS} runs (${raw.runs.map((r) => fmt(r)).join(', ')} posts/s); median run ${ms(raw.ms)} at the receiver, ${ms(raw.clientMs)} at the client. Posts carrying X-ENS-Signature and webhook-signature: ${iso.signed} / ${CALLBACKS_N} (isolated), ${e2e.signed} / ${CALLBACKS_N} (end to end). ` +
            `CPU per post (bench = client + receiver): raw ${formatCpuPerOp(cpuPerOp(rawDiag, CALLBACKS_N * RAW_REPEATS), ['ENS', 'PostgreSQL', 'NATS'])}` +
            `${iso.diagnosis ? `; ENS callbacks role alone ${formatCpuPerOp(cpuPerOp(iso.diagnosis, CALLBACKS_N))}, PostgreSQL per post ${formatPgPerOp(iso.diagnosis, CALLBACKS_N)}` : ''}.`,
        );
        report.data.callbacks = { raw, endToEnd: e2e, isolated: iso };
      });
    }

    // ── 5. Feed ─────────────────────────────────────────────────────────────────────────────────
    if (phases.has('feed')) {
      await phase('feed', async () => {
        await waitIdle(db, 'feed');
        progress(
          `feed: topping the bench client up to ${feedRows.toLocaleString('en-US')} deliveries straight in PostgreSQL (ENS idle)`,
        );
        const fill = await fillFeed(db, client.clientId, feedRows);
        progress(
          `feed: ${fill.total.toLocaleString('en-US')} deliveries (${fill.inserted.toLocaleString('en-US')} inserted in ${ms(fill.insertMs)}, VACUUM ANALYZE ${ms(fill.vacuumMs)})`,
        );
        const [cases] = await watched('feed pages, ENS', () =>
          timeFeedPages(api.baseUrl, token, db, client.clientId, fill.total),
        );
        for (const c of cases) {
          report.row({
            measure: `Feed @ ${fmt(fill.total)} rows: ${c.name} (limit=1000, ${c.rows} rows${c.ms.n < 20 ? `, n=${c.ms.n}` : ''})`,
            raw: '',
            ens: `p50 ${fmt(c.ms.p50)} ms, p99 ${fmt(c.ms.p99)} ms`,
            ratio: '',
            target: 'p99 < 50 ms',
            met: c.ms.p99 < 50 ? 'yes' : 'NO',
          });
        }
        report.note(
          `Feed: ${fill.existing.toLocaleString('en-US')} deliveries from the earlier phases + ${fill.inserted.toLocaleString('en-US')} inserted (one synthetic handoff, status sent, stamped, updated_at 2026-01-01 + n µs, ` +
            `reference ref-(n mod 1000)), then VACUUM ANALYZE. Each case: 20 timed GETs after 3 untimed (5 when the untimed ones exceed 250 ms), one at a time, until the body is read. ` +
            `middle/end = updated_since the stamp at row ${Math.floor(fill.total / 2).toLocaleString('en-US')} / ${(fill.total - 1001).toLocaleString('en-US')}; the reference filter matches ~1 row in 1000.`,
        );
        report.data.feed = { fill, cases };
      });
    }

    // ── 6b. Scaling: the same measures with 1, 2 (and more, where there are cores) processes
    // ──────
    if (phases.has('scaling')) {
      await phase('scaling', async () => {
        const cores = os.availableParallelism();
        const counts = [
          ...new Set(
            [1, 2, Math.min(cores, 4), cores].filter((n) => n <= Math.max(2, cores) && n <= 8),
          ),
        ].sort((a, b) => a - b);
        const runs: {
          n: number;
          accept: number;
          fanout: number;
          acceptDiag: Diagnosis;
          fanoutDiag: Diagnosis;
          rssMb: number[];
        }[] = [];
        for (const n of counts) {
          await waitIdle(db, 'scaling');
          await api.stop();
          await clearRecord(db);
          api = await startMain(`scaling-${n}`, { ENS_PROCESSES: String(n) });
          await allProcessesUp(api.pid, n);
          progress(`scaling: ENS_PROCESSES=${n}: accept, ${ACCEPT.concurrency} connections`);
          const [acc, acceptDiag] = await watched(
            `scaling: accept, ${n} process${n > 1 ? 'es' : ''}`,
            () => ensAccept(api.baseUrl, token, ACCEPT),
          );
          await waitIdle(db, 'scaling');
          await clearRecord(db);
          progress(`scaling: ENS_PROCESSES=${n}: one handoff of ${FANOUT_N} sms`);
          const [f, fanoutDiag] = await watched(
            `scaling: fan-out, ${n} process${n > 1 ? 'es' : ''}`,
            () => ensFanout(api.baseUrl, token, db, FANOUT_N),
          );
          const rssMb = await treeRssMb(api.pid);
          progress(
            `scaling: ${n} process(es): accept ${fmt(acc.rate)}/s, fan-out ${fmt(f.sendRate)} sent/s; RSS ${rssMb.map((r) => `${fmt(r)} MB`).join(', ')}`,
          );
          runs.push({ n, accept: acc.rate, fanout: f.sendRate, acceptDiag, fanoutDiag, rssMb });
        }
        const one = runs[0]!;
        for (const r of runs.slice(1)) {
          const target = r.n === 2 ? 1.3 : undefined;
          report.row({
            measure: `Scaling: accept, ENS_PROCESSES=${r.n} vs 1 (C=${ACCEPT.concurrency})`,
            raw: `${fmt(one.accept)} /s`,
            ens: `${fmt(r.accept)} /s`,
            ratio: (r.accept / one.accept).toFixed(2),
            target: target ? `≥ ${target}` : 'info',
            met: target ? (r.accept / one.accept >= target ? 'yes' : 'NO') : 'info',
          });
          report.row({
            measure: `Scaling: ${FANOUT_N} fan-out, ENS_PROCESSES=${r.n} vs 1`,
            raw: `${fmt(one.fanout)} /s`,
            ens: `${fmt(r.fanout)} /s`,
            ratio: (r.fanout / one.fanout).toFixed(2),
            target: target ? `≥ ${target}` : 'info',
            met: target ? (r.fanout / one.fanout >= target ? 'yes' : 'NO') : 'info',
          });
        }
        report.note(
          `Scaling (${cores} cores): CPU per accepted request and per delivery sent, split by process group, with 1…${counts.at(-1)} ENS processes. ` +
            runs
              .map(
                (r) =>
                  `${r.n}: accept ${formatCpuPerOp(cpuPerOp(r.acceptDiag, r.accept * (ACCEPT.durationMs / 1000)))}; fan-out ${formatCpuPerOp(cpuPerOp(r.fanoutDiag, FANOUT_N))}; RSS after the fan-out ${r.rssMb.map((m) => `${fmt(m)} MB`).join(' + ')}${r.n > 1 ? ' (the supervisor first)' : ''}`,
              )
              .join(' | '),
        );
        report.data.scaling = runs.map((r) => ({
          processes: r.n,
          acceptPerS: r.accept,
          fanoutPerS: r.fanout,
          acceptCpuPerOp: cpuPerOp(r.acceptDiag, r.accept * (ACCEPT.durationMs / 1000)),
          fanoutCpuPerOp: cpuPerOp(r.fanoutDiag, FANOUT_N),
        }));
        await api.stop();
        await clearRecord(db);
        api = await startMain('main-after-scaling');
      });
    }

    // ── 7. Peers: what a team would pick instead, on the same engines
    // ───────────────────────────── Last, because it empties the delivery record the earlier phases
    // built (each of its ENS runs starts from an empty one).
    if (phases.has('peers')) {
      await phase('peers', async () => {
        await waitIdle(db, 'peers');
        await runPeersPhase({
          engines,
          db,
          ens: {
            label: 'ENS, all roles, 1 process',
            pids: [api.pid],
            baseUrl: api.baseUrl,
            token,
            clientId: client.clientId,
          },
          report,
          accept: ACCEPT,
          redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
          ...(growthRows ? { growthRows } : {}),
          runs: peerRuns,
        });
      });
    }

    // ── 8. The record's cost: WAL and PostgreSQL CPU per delivery (issue 27) ─────────────────────
    // Engines of its own (a fresh PostgreSQL per configuration), so it reads only its deliveries.
    if (phases.has('wal')) {
      await phase('wal', async () => {
        const measures: WalMeasure[] = [];
        for (const config of ['project', 'stock'] as const) {
          progress(`wal: ${config} PostgreSQL, 2 handoffs of ${FANOUT_N} sms with callbacks`);
          measures.push(await measureWal({ config, n: FANOUT_N, handoffs: 2 }));
        }
        progress(`wal: project PostgreSQL, 2 handoffs of ${FANOUT_N} sms without callbacks`);
        measures.push(
          await measureWal({ config: 'project', n: FANOUT_N, handoffs: 2, callbacks: false }),
        );
        const [own, stock, bare] = measures as [WalMeasure, WalMeasure, WalMeasure];
        const kbPer = (m: WalMeasure) => m.walBytes / m.deliveries / 1024;
        const msPer = (m: WalMeasure) => (m.pgCpuSeconds / m.deliveries) * 1000;
        // Issue 27's rows: half of the start's WAL by the project's count (a life without a
        // callback: 3.7-3.9 KB), on a stock PostgreSQL with callbacks (5.2 KB by an independent
        // count), and with callbacks on ENS's own (6.23 KB at the start).
        for (const [m, what, target, why] of [
          [bare, "without a callback, the issue's count,", 1.9, ''],
          [own, 'with callbacks', 3.1, " (half of the start's 6.23)"],
          [stock, 'with callbacks', 2.6, ''],
        ] as const) {
          report.row({
            measure: `WAL per delivery, whole life, 2 × ${fmt(FANOUT_N)} handoff ${what} (${m.config === 'project' ? "ENS's own PostgreSQL" : 'stock PostgreSQL'})`,
            raw: '',
            ens: `${kbPer(m).toFixed(2)} KB (FPI ${((100 * m.fpiBytes) / m.walBytes).toFixed(1)} %)`,
            ratio: '',
            target: `≤ ${target} KB${why}`,
            met: kbPer(m) <= target ? 'yes' : 'NO',
          });
        }
        // "≤ 0.08 ms (about half of today's)" was 0.52 of the start on the issue's machine; the
        // start costs 0.15-0.45 ms on the machines it has run on, so the verdict comes from pairs
        // against it in the same minutes (bench:wal-pairs), not from this absolute figure.
        report.row({
          measure: "PostgreSQL CPU per delivery, whole life, with callbacks (ENS's own PostgreSQL)",
          raw: '',
          ens: `${msPer(own).toFixed(3)} ms`,
          ratio: '',
          target: 'info (≤ 0.52 of the start: npm run bench:wal-pairs)',
          met: 'info',
        });
        report.note(
          `WAL: each configuration on a fresh PostgreSQL (fsync on) with its own NATS, an all-roles ENS from source and a callback receiver; ` +
            `two ${fmt(FANOUT_N)}-recipient handoffs with callback_url (and, on ENS's own PostgreSQL, two without), each counted from its POST until every delivery is sent, stamped and called back; ` +
            `WAL from pg_current_wal_lsn, CPU = utime + stime of every postgres process. Stock CPU per delivery ${msPer(stock).toFixed(3)} ms; without callbacks ${msPer(bare).toFixed(3)} ms. ` +
            `By record type and relation: test/bench/last-run.json (wal), or \`npm run bench:wal\`.`,
        );
        report.data.wal = measures;
        for (const m of measures) process.stderr.write(`\n${formatWal(m)}\n`);
      });
    }

    // Stop the ENS children now so their CPU profiles are written, then summarise them.
    const childLogs = allChildren.map((c) => ({
      name: c.name,
      warnings: c.logs.warnings,
      errors: c.logs.errors,
      samples: Object.fromEntries(c.logs.samples),
    }));
    for (const c of allChildren) await c.stop();
    await receiver?.stop();
    for (const c of childLogs) {
      if (c.warnings + c.errors > 0)
        report.note(
          `ENS child "${c.name}" logged ${c.warnings} warnings and ${c.errors} errors: ${Object.entries(
            c.samples,
          )
            .map(([m, n]) => `${n} × "${m}"`)
            .join('; ')}`,
        );
    }
    if (childLogs.every((c) => c.warnings + c.errors === 0))
      report.note('No ENS child logged a warning or an error.');
    report.data.childLogs = childLogs;
    if (profDir) {
      profiles = await summariseProfiles(profDir);
      for (const p of profiles) process.stderr.write(`\n${formatProfile(p)}\n`);
      report.data.profiles = profiles;
      report.note(`CPU profiles (open in Chrome DevTools): ${profDir}`);
    }
  } catch (err) {
    failures++;
    progress(`bench FAILED: ${(err as Error).stack ?? String(err)}`);
    report.failed('setup', err);
  } finally {
    await runCleanup();
  }

  const durationMs = elapsedMs();
  const loadEnd = os.loadavg();
  header.push(
    `Run took ${(durationMs / 1000).toFixed(0)} s; load average ${loadStart.map((l) => l.toFixed(2)).join(' ')} at start, ${loadEnd.map((l) => l.toFixed(2)).join(' ')} at end (other work on this machine skews absolute figures; ratios share the noise)`,
  );
  const table = report.table(header);
  process.stdout.write(`\n${table}\n`);
  const jsonFile = path.join(HERE, 'last-run.json');
  await report.writeJson(jsonFile, {
    startedAt: startedAt.toISOString(),
    durationMs,
    phases: [...phases],
    feedRows,
    growthRows,
    profiling,
    cpus: os.cpus().length,
    loadStart,
    loadEnd,
    header,
    table,
  });
  progress(`wrote ${path.relative(process.cwd(), jsonFile)}`);
  return failures > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    progress(`bench FAILED: ${(err as Error).stack ?? String(err)}`);
    await runCleanup();
    process.exit(1);
  },
);
