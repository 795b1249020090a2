import { isAborted } from './cleanup.ts';
import { sleep } from './log.ts';

/**
 * Outcome label of one operation: "202", "ok", "error ECONNRESET", ... `worker` is the closed-loop
 * worker's index (0 in an open loop).
 */
export type Op = (worker: number) => Promise<string>;

export interface LoadResult {
  /** Completions counted as ok inside the measurement window. */
  ok: number;
  /** ok completions over the whole run, warm-up included (for CPU per operation). */
  okTotal: number;
  /** Every completion inside the window by outcome label (ok ones included). */
  outcomes: Record<string, number>;
  /** ok completions per second over the window. */
  rate: number;
  windowMs: number;
  /**
   * Latency (ms) of ok operations that started inside the window (open loop: from their scheduled
   * time).
   */
  latenciesMs: number[];
}

/** Counters a caller can watch while a load runs (the memory phase samples them). */
export interface LiveCounters {
  okTotal: number;
  inWindow: boolean;
}

/**
 * Closed loop: `concurrency` workers each run op back to back for warmupMs + durationMs. Counts
 * completions that land inside the window after the warm-up.
 */
export async function closedLoop(o: {
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  op: Op;
  isOk: (outcome: string) => boolean;
  live?: LiveCounters;
}): Promise<LoadResult> {
  const start = performance.now();
  const windowStart = start + o.warmupMs;
  const end = windowStart + o.durationMs;
  const outcomes: Record<string, number> = {};
  const latenciesMs: number[] = [];
  let ok = 0;
  const live = o.live ?? { okTotal: 0, inWindow: false };
  const flip = setTimeout(() => (live.inWindow = true), o.warmupMs);
  await Promise.all(
    Array.from({ length: o.concurrency }, async (_, worker) => {
      while (performance.now() < end && !isAborted()) {
        const t0 = performance.now();
        const outcome = await o
          .op(worker)
          .catch(
            (err: unknown) => `error ${(err as { code?: string }).code ?? (err as Error).message}`,
          );
        const t1 = performance.now();
        const good = o.isOk(outcome);
        if (good) live.okTotal++;
        if (t1 >= windowStart && t1 <= end) {
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
          if (good) ok++;
          if (good && t0 >= windowStart) latenciesMs.push(t1 - t0);
        }
      }
    }),
  );
  clearTimeout(flip);
  live.inWindow = false;
  return {
    ok,
    okTotal: live.okTotal,
    outcomes,
    rate: ok / (o.durationMs / 1000),
    windowMs: o.durationMs,
    latenciesMs,
  };
}

export interface OpenLoopResult extends LoadResult {
  offeredRate: number;
  /** Operations the generator skipped because maxOutstanding were already in flight. */
  skipped: number;
}

/**
 * Open loop at a fixed offered rate: operation i is due at start + i/rate whether or not earlier
 * ones have answered, and its latency is measured from that due time (so a stalled server shows
 * up as latency instead of silently lowering the offered rate).
 */
export async function openLoop(o: {
  rate: number;
  warmupMs: number;
  durationMs: number;
  maxOutstanding: number;
  op: Op;
  isOk: (outcome: string) => boolean;
}): Promise<OpenLoopResult> {
  const start = performance.now();
  const windowStart = start + o.warmupMs;
  const end = windowStart + o.durationMs;
  const total = Math.floor((o.rate * (o.warmupMs + o.durationMs)) / 1000);
  const outcomes: Record<string, number> = {};
  const latenciesMs: number[] = [];
  let ok = 0;
  let okTotal = 0;
  let skipped = 0;
  let outstanding = 0;
  const pending = new Set<Promise<void>>();
  let i = 0;
  while (i < total && !isAborted()) {
    const due = Math.min(total, Math.floor(((performance.now() - start) * o.rate) / 1000) + 1);
    for (; i < due; i++) {
      const scheduled = start + (i * 1000) / o.rate;
      const counted = scheduled >= windowStart && scheduled < end;
      if (outstanding >= o.maxOutstanding) {
        if (counted) skipped++;
        continue;
      }
      outstanding++;
      const p = o
        .op(0)
        .catch(
          (err: unknown) => `error ${(err as { code?: string }).code ?? (err as Error).message}`,
        )
        .then((outcome) => {
          outstanding--;
          if (o.isOk(outcome)) okTotal++;
          if (!counted) return;
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
          if (o.isOk(outcome)) {
            ok++;
            latenciesMs.push(performance.now() - scheduled);
          }
        });
      pending.add(p);
      void p.finally(() => pending.delete(p));
    }
    await sleep(1);
  }
  await Promise.all([...pending]);
  // The rate counts answers to operations scheduled inside the window (they may arrive a bit
  // later).
  return {
    ok,
    okTotal,
    outcomes,
    rate: ok / (o.durationMs / 1000),
    windowMs: o.durationMs,
    latenciesMs,
    offeredRate: o.rate,
    skipped,
  };
}
