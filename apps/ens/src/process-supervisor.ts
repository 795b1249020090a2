import cluster, { type Worker } from 'node:cluster';
import { EnsError } from '@ens/core';
import type { Logger } from 'pino';
import type { Role } from './roles.ts';

/*
 * The supervising process of `ens serve` with ENS_PROCESSES > 1. It runs no role itself: it forks
 * the processes (node:cluster, so the api processes share the listening port), restarts one that
 * dies, and stops them all on a signal. Engines, migrations and the master-key check are done
 * before it forks; the children are handed the engines' URLs.
 */

/** What a child sends when its roles run (and, with the api role, it listens). */
export const CHILD_READY = 'ens:ready';

/** A child that dies sooner than this after its start is restarted after a growing pause. */
const STABLE_MS = 10_000;
const FIRST_PAUSE_MS = 500;
const LONGEST_PAUSE_MS = 30_000;
/** How long a stop waits for the children to finish their work before killing them. */
const STOP_WAIT_MS = 30_000;

export interface ChildPlan {
  /** The roles of child `index` (0-based). */
  roles(index: number): Role[];
  count: number;
  /** Variables added to each child's environment (the engines' URLs). */
  env: Record<string, string>;
}

export interface Supervisor {
  /** Resolves when every child has reported ready once; rejects when one dies before it did. */
  ready: Promise<void>;
  /** The children's pids now, by index. */
  pids(): number[];
  /**
   * Stops every child (SIGTERM, then SIGKILL after STOP_WAIT_MS) and resolves when all have exited.
   */
  stop(): Promise<void>;
}

/**
 * One of `ens serve`'s processes stopped before it was ready; its own error is logged above this
 * one.
 */
export class ChildFailedAtStart extends EnsError {
  static override readonly code: string = 'ENS_ERR_PROCESS_START';
  constructor(
    readonly index: number,
    readonly exitCode: number,
  ) {
    super(
      `process ${index + 1} stopped before it was ready (exit ${exitCode}); its error is above`,
    );
  }
}

export function superviseChildren(plan: ChildPlan, logger: Logger): Supervisor {
  const children = new Map<number, { worker: Worker; startedAt: number; ready: boolean }>();
  const pauses = new Array<number>(plan.count).fill(0);
  let stopping = false;
  let readyCount = 0;
  let settle!: { resolve: () => void; reject: (e: Error) => void };
  const ready = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  let allExited: (() => void) | null = null;

  const fork = (index: number) => {
    // Each child runs `ens serve --roles …` again; it sees it is a cluster worker and runs its
    // roles.
    cluster.setupPrimary({
      exec: process.argv[1],
      args: ['serve', '--roles', plan.roles(index).join(',')],
    });
    const worker = cluster.fork(plan.env);
    const child = { worker, startedAt: Date.now(), ready: false };
    children.set(index, child);
    worker.on('message', (m: { type?: string }) => {
      if (m?.type !== CHILD_READY || child.ready) return;
      child.ready = true;
      if (++readyCount === plan.count) settle.resolve();
    });
    worker.on('exit', (code, signal) => {
      children.delete(index);
      if (stopping) {
        if (children.size === 0) allExited?.();
        return;
      }
      if (!started && !child.ready) {
        // A child that cannot start (a port in use, a bad plugin) would fail the same way again:
        // the start fails with it instead of looping.
        settle.reject(new ChildFailedAtStart(index, code || 1));
        return;
      }
      const lived = Date.now() - child.startedAt;
      pauses[index] =
        lived < STABLE_MS
          ? Math.min(LONGEST_PAUSE_MS, Math.max(FIRST_PAUSE_MS, pauses[index]! * 2))
          : 0;
      logger.warn(
        { process: index + 1, pid: worker.process.pid, code, signal, restartInMs: pauses[index] },
        'an ENS process stopped; starting it again',
      );
      // Not unref'd: with every child down, this timer is what keeps the supervisor running.
      setTimeout(() => !stopping && fork(index), pauses[index]);
    });
  };
  // Until every child was ready once, a death fails the start; afterwards it is restarted.
  let started = false;
  void ready.then(
    () => (started = true),
    () => {},
  );

  for (let i = 0; i < plan.count; i++) fork(i);

  return {
    ready,
    pids: () =>
      [...children.entries()].sort(([a], [b]) => a - b).map(([, c]) => c.worker.process.pid!),
    async stop() {
      stopping = true;
      if (children.size === 0) return;
      const done = new Promise<void>((resolve) => (allExited = resolve));
      for (const { worker } of children.values()) worker.process.kill('SIGTERM');
      const killer = setTimeout(() => {
        logger.warn({ waitedMs: STOP_WAIT_MS }, 'ENS processes still running: killing them');
        for (const { worker } of children.values()) worker.process.kill('SIGKILL');
      }, STOP_WAIT_MS);
      await done;
      clearTimeout(killer);
    },
  };
}
