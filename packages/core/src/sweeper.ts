import type { Logger } from 'pino';
import type { Db } from './db/pool.ts';
import { sweeperRequeued } from './metrics.ts';
import { purgeIdempotencyKeys } from './store/accept.ts';
import type { CallbackStore } from './store/callbacks.ts';
import type { DeliveryStore } from './store/deliveries.ts';
import type { SuppressionStore } from './store/suppressions.ts';

/*
 * PostgreSQL is the source of truth and JetStream only carries wake-ups, so a wake-up lost with a
 * crash or with the JetStream store would strand its row. The sweeper is what makes that loss
 * harmless (invariant 1): it looks in PostgreSQL for work that is due and not in flight and wakes
 * the role again (the stores publish the wake-ups, after their own commits). It needs only the
 * stores, never a consume loop, so it keeps working while a loop is down, and each job runs on
 * its own timer, so one job that fails
 * (PostgreSQL away) delays none of the others.
 */

/** One periodic job of the sweeper. */
export interface SweepJob {
  /** Names the job in the failure log. */
  readonly name: string;
  /** Time between the starts of two passes; the first pass starts at once. */
  readonly everyMs: number;
  /** The warning logged when a pass throws; the next pass tries again. */
  readonly failureMessage: string;
  run(): Promise<void>;
}

export interface Sweeper {
  /** Stops the timers; a pass under way finishes on its own. */
  stop(): void;
}

/** How often the overdue jobs look; what they take is set by ENS_SWEEP_GRACE. */
const OVERDUE_EVERY_MS = 2_000;
/** Rows one pass re-enqueues at most; the next pass takes the rest. */
const OVERDUE_BATCH = 1000;
/** Expired keys are only storage, so a slow purge is enough. */
const PURGE_EVERY_MS = 600_000;

/**
 * Re-enqueues pending deliveries whose wake-up was lost: due for longer than `graceMs` and not
 * leased. The store wakes their senders after its commit.
 */
export function requeueOverdueDeliveries(deps: { deliveries: DeliveryStore; logger: Logger }, graceMs: number): SweepJob {
  return {
    name: 'overdue-deliveries',
    everyMs: OVERDUE_EVERY_MS,
    failureMessage: 'sweep failed; will try again',
    async run() {
      const overdue = await deps.deliveries.takeOverdue(graceMs, OVERDUE_BATCH);
      if (overdue.length === 0) return;
      sweeperRequeued.inc({ kind: 'delivery' }, overdue.length);
      deps.logger.info({ count: overdue.length }, 'sweeper re-enqueued deliveries');
    },
  };
}

/**
 * Re-enqueues pending callbacks whose wake-up was lost: due for longer than `graceMs` and not
 * leased. The store wakes them after its commit.
 */
export function requeueOverdueCallbacks(deps: { callbacks: CallbackStore }, graceMs: number): SweepJob {
  return {
    name: 'overdue-callbacks',
    everyMs: OVERDUE_EVERY_MS,
    failureMessage: 'callback sweep failed; will try again',
    async run() {
      const overdue = await deps.callbacks.takeOverdue(graceMs, OVERDUE_BATCH);
      if (overdue.length === 0) return;
      sweeperRequeued.inc({ kind: 'callback' }, overdue.length);
    },
  };
}

/** Deletes idempotency keys older than `ttlMs` (ENS_IDEMPOTENCY_TTL); a replay after that is a new handoff. */
export function purgeExpiredIdempotencyKeys(deps: { db: Db }, ttlMs: number): SweepJob {
  return {
    name: 'idempotency-key-purge',
    everyMs: PURGE_EVERY_MS,
    failureMessage: 'idempotency key purge failed; will try again',
    async run() {
      await purgeIdempotencyKeys(deps.db, ttlMs);
    },
  };
}

/**
 * Removes soft-bounce entries whose hold has lapsed. The send path already ignores them (the claim
 * reads expires_at); this only keeps the list from filling with them.
 */
export function purgeLapsedSuppressions(deps: { suppressions: SuppressionStore }): SweepJob {
  return {
    name: 'lapsed-suppression-purge',
    everyMs: PURGE_EVERY_MS,
    failureMessage: 'lapsed suppression purge failed; will try again',
    async run() {
      while ((await deps.suppressions.purgeLapsed()) > 0);
    },
  };
}

/** Starts each job now and then every `everyMs`. Never throws: a failed pass is logged as a warning. */
export function startSweeper(jobs: readonly SweepJob[], logger: Logger): Sweeper {
  const timers = jobs.map((job) => {
    const pass = () => {
      job.run().catch((err: unknown) => logger.warn({ err, job: job.name }, job.failureMessage));
    };
    const timer = setInterval(pass, job.everyMs);
    pass();
    return timer;
  });
  return {
    stop() {
      for (const t of timers) clearInterval(t);
    },
  };
}
