import { readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Pool } from 'undici';
import type { EnsChild } from './ens.ts';
import { ensPool, handoffBody, phone, postHandoff } from './http.ts';
import { closedLoop, type LiveCounters } from './load.ts';
import { progress, sleep } from './log.ts';
import { slope } from './stats.ts';

export interface MemorySample {
  t: number;
  requests: number;
  rssKb: number;
  /** From ENS's /metrics (prom-client's default process metrics). */
  heapUsedKb?: number;
  heapTotalKb?: number;
  externalKb?: number;
}

export interface MemoryResult {
  durationMs: number;
  requests: number;
  rate: number;
  non202: Record<string, number>;
  samples: MemorySample[];
  startKb: number;
  endKb: number;
  maxKb: number;
  /** Least-squares slope of RSS over requests served, in KB per 1000 requests. */
  kbPer1000: number;
  /**
   * Live JS heap (after the full GC a heap snapshot forces) of the idle ENS, after the RSS window
   * and again after `requests` more requests.
   */
  liveHeap: { beforeKb: number; afterKb: number; requests: number; bytesPerRequest: number } | null;
}

async function heapKb(
  pool: Pool,
): Promise<Pick<MemorySample, 'heapUsedKb' | 'heapTotalKb' | 'externalKb'> | null> {
  try {
    const res = await pool.request({ method: 'GET', path: '/metrics' });
    const text = await res.body.text();
    const v = (name: string) =>
      Math.round(
        Number(
          new RegExp(`^ens_nodejs_${name}\\s+([0-9.eE+-]+)`, 'm').exec(text)?.[1] ?? Number.NaN,
        ) / 1024,
      );
    return {
      heapUsedKb: v('heap_size_used_bytes'),
      heapTotalKb: v('heap_size_total_bytes'),
      externalKb: v('external_memory_bytes'),
    };
  } catch {
    return null;
  }
}

/**
 * Asks the child for a heap snapshot (it runs with --heapsnapshot-signal=SIGUSR2 and
 * --diagnostic-dir=dir), waits for the file, and returns the live heap in bytes: a snapshot is
 * taken after a full GC, so unlike RSS or heapUsed it holds no garbage. The file is then deleted.
 */
export async function liveHeapBytes(child: EnsChild, dir: string): Promise<number> {
  const before = new Set(await readdir(dir).catch(() => [] as string[]));
  process.kill(child.pid, 'SIGUSR2');
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error('no heap snapshot after 60 s');
    await sleep(250);
    const file = (await readdir(dir)).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (!file) continue;
    const full = path.join(dir, file);
    const size1 = (await stat(full)).size;
    await sleep(300);
    if ((await stat(full)).size !== size1 || size1 === 0) continue;
    let snap: { snapshot: { meta: { node_fields: string[] } }; nodes: number[] };
    try {
      snap = JSON.parse(await readFile(full, 'utf8')) as typeof snap;
    } catch {
      continue; // still being written
    }
    await rm(full, { force: true });
    const fields = snap.snapshot.meta.node_fields;
    const selfSize = fields.indexOf('self_size');
    let total = 0;
    for (let i = selfSize; i < snap.nodes.length; i += fields.length) total += snap.nodes[i]!;
    return total;
  }
}

/**
 * Warm-up, then a sustained closed-loop accept load (same shape as the accept phase) sampling VmRSS
 * every second. Then, because RSS cannot tell garbage from a leak: drain, live heap (snapshot),
 * `heapCheckMs` more load, drain, live heap again. The snapshots come after the RSS window since
 * taking one inflates RSS for good.
 */
export async function memoryUnderLoad(
  child: EnsChild,
  token: string,
  o: {
    concurrency: number;
    warmupMs: number;
    durationMs: number;
    heapCheckMs: number;
    snapshotDir?: string;
    waitIdle: () => Promise<unknown>;
  },
): Promise<MemoryResult> {
  const p = ensPool(child.baseUrl, o.concurrency);
  const metrics = new Pool(child.baseUrl, { connections: 1 });
  let i = 0;
  const op = async () =>
    (await postHandoff(p.pool, token, handoffBody([phone(i++ % 7000)]))).status.toString();
  const isOk = (x: string) => x === '202';
  try {
    await closedLoop({ concurrency: o.concurrency, warmupMs: 0, durationMs: o.warmupMs, op, isOk });

    const live: LiveCounters = { okTotal: 0, inWindow: false };
    const samples: MemorySample[] = [];
    const t0 = Date.now();
    const sample = async () => {
      const t = Date.now() - t0;
      const requests = live.okTotal;
      const [rssKb, heap] = await Promise.all([child.rssKb(), heapKb(metrics)]);
      samples.push({ t, requests, rssKb, ...(heap ?? {}) });
    };
    await sample();
    progress(`memory: ${o.durationMs / 1000} s of load`);
    const timer = setInterval(() => void sample(), 1000);
    const r = await closedLoop({
      concurrency: o.concurrency,
      warmupMs: 0,
      durationMs: o.durationMs,
      op,
      isOk,
      live,
    }).finally(() => clearInterval(timer));
    await sample();

    let liveHeap: MemoryResult['liveHeap'] = null;
    if (o.snapshotDir) {
      await o.waitIdle();
      progress('memory: heap snapshot of the idle ENS (live heap after a full GC)');
      const beforeHeap = await liveHeapBytes(child, o.snapshotDir);
      progress(`memory: ${o.heapCheckMs / 1000} s more load`);
      const more = await closedLoop({
        concurrency: o.concurrency,
        warmupMs: 0,
        durationMs: o.heapCheckMs,
        op,
        isOk,
      });
      await o.waitIdle();
      progress('memory: heap snapshot of the idle ENS again');
      const afterHeap = await liveHeapBytes(child, o.snapshotDir);
      liveHeap = {
        beforeKb: Math.round(beforeHeap / 1024),
        afterKb: Math.round(afterHeap / 1024),
        requests: more.okTotal,
        bytesPerRequest: (afterHeap - beforeHeap) / Math.max(1, more.okTotal),
      };
    }
    const rss = samples.map((s) => s.rssKb);
    return {
      durationMs: o.durationMs,
      requests: r.okTotal,
      rate: r.rate,
      non202: Object.fromEntries(Object.entries(r.outcomes).filter(([k]) => k !== '202')),
      samples,
      startKb: rss[0]!,
      endKb: rss[rss.length - 1]!,
      maxKb: Math.max(...rss),
      kbPer1000: slope(samples.map((s) => ({ x: s.requests / 1000, y: s.rssKb }))),
      liveHeap,
    };
  } finally {
    await p.close();
    await metrics.destroy().catch(() => {});
  }
}
