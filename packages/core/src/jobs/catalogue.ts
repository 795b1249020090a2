import type { Logger } from 'pino';
import { refreshStatistics } from '../db/table-statistics.ts';
import type { Db } from '../db/pool.ts';
import { collectUnusedMediaPass } from '../media/media-collector.ts';
import type { MediaStore } from '../media/media-store.ts';
import { sweeperRequeued } from '../metrics.ts';
import { retentionRound, type RetentionOptions } from '../retention/retention-job.ts';
import type { Runtime } from '../runtime.ts';
import { purgeIdempotencyKeys } from '../store/accept.ts';
import type { CallbackStore } from '../store/callbacks.ts';
import type { DeliveryStore } from '../store/deliveries.ts';
import type { SessionReaper } from '../store/process-sessions.ts';
import type { SuppressionStore } from '../store/suppressions.ts';
import type { Job } from './job.ts';

/*
 * Every periodic job ENS runs, declared here with its interval; the scheduler (scheduler.ts) runs
 * them and /metrics shows each one by name (ens_job_*). The work each job calls lives beside the
 * data it keeps (the store, db/, media/, retention/); the console's alert evaluation is the ops
 * role's own code (services/ops/src/alerts/evaluator.ts) but its interval is declared here too.
 *
 * The sweeps are what make a lost wake-up harmless (invariant 1): PostgreSQL is the source of truth
 * and JetStream only carries wake-ups, so a wake-up lost with a crash or with the JetStream store
 * would strand its row. They look in PostgreSQL for work that is due and not in flight and wake
 * the role again (the stores publish the wake-ups, after their own commits). They need only the
 * stores, never a consume loop, so they keep working while a loop is down.
 */

/** How often each job starts a pass, in ms, by name. */
export const JOB_EVERY_MS = {
  /** The sweeps; what they take is set by ENS_SWEEP_GRACE. */
  'overdue-deliveries': 2_000,
  'overdue-callbacks': 2_000,
  /**
   * Finds processes whose heartbeat stopped (ENS_SESSION_TIMEOUT) and retries their work; one
   * statement on a table of a row per process while none is dead (store/process-sessions.ts).
   */
  'dead-sessions': 1_000,
  /** Expired keys are only storage, so a slow purge is enough. */
  'idempotency-key-purge': 600_000,
  /**
   * The send path already ignores lapsed entries; this only keeps the list from filling with them.
   */
  'lapsed-suppression-purge': 600_000,
  'media-collect': 600_000,
  retention: 300_000,
  /**
   * Often, so a table that grows fast is analysed before its plans go bad (db/table-statistics.ts).
   */
  'table-statistics': 5_000,
  /** The console's alert rules (services/ops); the first pass waits one interval. */
  'alert-evaluation': 30_000,
} as const;

export type JobName = keyof typeof JOB_EVERY_MS;

/** Rows one sweep pass re-enqueues at most; the next pass takes the rest. */
const OVERDUE_BATCH = 1000;

/**
 * Re-enqueues pending deliveries whose wake-up was lost: due for longer than `graceMs` and not
 * leased. The store wakes their senders after its commit.
 */
export function requeueOverdueDeliveries(
  deps: { deliveries: DeliveryStore; logger: Logger },
  graceMs: number,
): Job {
  return {
    name: 'overdue-deliveries',
    everyMs: JOB_EVERY_MS['overdue-deliveries'],
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
export function requeueOverdueCallbacks(deps: { callbacks: CallbackStore }, graceMs: number): Job {
  return {
    name: 'overdue-callbacks',
    everyMs: JOB_EVERY_MS['overdue-callbacks'],
    failureMessage: 'callback sweep failed; will try again',
    async run() {
      const overdue = await deps.callbacks.takeOverdue(graceMs, OVERDUE_BATCH);
      if (overdue.length === 0) return;
      sweeperRequeued.inc({ kind: 'callback' }, overdue.length);
    },
  };
}

/**
 * Ends the sessions of processes killed or paused past ENS_SESSION_TIMEOUT, with their claims
 * (deliveries' and callbacks'), and wakes their work (store/process-sessions.ts). Every worker
 * process runs it; a deployment always has workers, so callbacks processes need not.
 */
export function endDeadSessions(deps: { reaper: SessionReaper; logger: Logger }): Job {
  return {
    name: 'dead-sessions',
    everyMs: JOB_EVERY_MS['dead-sessions'],
    failureMessage: 'looking for dead processes failed; will try again',
    oneAtATime: true,
    async run() {
      const r = await deps.reaper.pass();
      if (r)
        deps.logger.warn(
          r,
          'processes declared dead (no heartbeat within ENS_SESSION_TIMEOUT); their work was ' +
            'retried',
        );
    },
  };
}

/**
 * Deletes idempotency keys older than `ttlMs` (ENS_IDEMPOTENCY_TTL); a replay after that is a new
 * handoff.
 */
export function purgeExpiredIdempotencyKeys(deps: { db: Db }, ttlMs: number): Job {
  return {
    name: 'idempotency-key-purge',
    everyMs: JOB_EVERY_MS['idempotency-key-purge'],
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
export function purgeLapsedSuppressions(deps: { suppressions: SuppressionStore }): Job {
  return {
    name: 'lapsed-suppression-purge',
    everyMs: JOB_EVERY_MS['lapsed-suppression-purge'],
    failureMessage: 'lapsed suppression purge failed; will try again',
    async run() {
      while ((await deps.suppressions.purgeLapsed()) > 0);
    },
  };
}

/**
 * Removes media objects no pending delivery uses, `graceMs` (ENS_MEDIA_GRACE) after they were last
 * written: images of deliveries that have ended, and those of requests that were refused or never
 * committed (media/media-collector.ts).
 */
export function collectUnusedMedia(
  deps: { db: Db; media: MediaStore; logger: Logger },
  graceMs: number,
  everyMs: number = JOB_EVERY_MS['media-collect'],
): Job {
  return {
    name: 'media-collect',
    everyMs,
    failureMessage: 'media collection failed; will try again',
    async run() {
      await collectUnusedMediaPass(deps, graceMs);
    },
  };
}

/**
 * Keeps the record for ENS_RETENTION (retention/retention-job.ts). A pass that finds the previous
 * one still running does nothing, so a long catch-up never runs twice at once in one process;
 * several processes split the work (a batch skips handoffs another one holds).
 */
export function removeExpiredRecords(
  deps: { db: Db; logger: Logger },
  opts: RetentionOptions & { everyMs?: number },
): Job {
  let running = false;
  return {
    name: 'retention',
    everyMs: opts.everyMs ?? JOB_EVERY_MS.retention,
    failureMessage: 'removing records past ENS_RETENTION failed; will try again',
    async run() {
      if (running) return;
      running = true;
      try {
        await retentionRound(deps, opts);
      } finally {
        running = false;
      }
    },
  };
}

/** Keeps the growing tables' statistics true to their size (db/table-statistics.ts). */
export function keepStatisticsFresh(deps: { db: Db; logger: Logger }): Job {
  return {
    name: 'table-statistics',
    everyMs: JOB_EVERY_MS['table-statistics'],
    failureMessage: 'refreshing table statistics failed; will try again',
    async run() {
      const analysed = await refreshStatistics(deps.db);
      if (analysed.length > 0) deps.logger.debug({ analysed }, 'table statistics refreshed');
    },
  };
}

/** The jobs of a worker process: the delivery sweep and the keeping of the record. */
export function workerJobs(
  rt: Pick<
    Runtime,
    'config' | 'db' | 'deliveries' | 'suppressions' | 'media' | 'logger' | 'reaper'
  >,
): Job[] {
  return [
    endDeadSessions(rt),
    requeueOverdueDeliveries(rt, rt.config.sweepGraceMs),
    purgeExpiredIdempotencyKeys(rt, rt.config.idempotencyTtlMs),
    collectUnusedMedia(rt, rt.config.mediaGraceMs),
    removeExpiredRecords(rt, { retentionMs: rt.config.retentionMs }),
    keepStatisticsFresh(rt),
    purgeLapsedSuppressions(rt),
  ];
}

/** The jobs of a callbacks process: the callback sweep. */
export function callbacksJobs(rt: Pick<Runtime, 'config' | 'callbacks'>): Job[] {
  return [requeueOverdueCallbacks(rt, rt.config.sweepGraceMs)];
}
