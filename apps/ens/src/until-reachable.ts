import { EnsError } from '@ens/core';
import type { Logger } from 'pino';

/** From half a second, doubling, to at most ten seconds between tries. */
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

export interface UntilReachableOptions {
  logger: Logger;
  /**
   * An engine being away (worth waiting for); anything else is thrown at once and ends the start.
   */
  isTransient(err: unknown): boolean;
  /** True once the process is stopping: the wait ends by throwing StoppedWaiting. */
  stopping(): boolean;
}

/** Thrown out of a wait that a stop signal interrupted. */
export class StoppedWaiting extends EnsError {
  static override readonly code: string = 'ENS_ERR_STOPPED';
  constructor() {
    super('stopped while waiting for PostgreSQL or NATS');
  }
}

/**
 * Runs `attempt` until it succeeds. PostgreSQL or NATS being away (restarting, failing over, not
 * up yet) is waited out with back-off and a warning per try, because a role process that exits
 * leaves its work undone with nobody told. Anything else (configuration, a port in use, a bug)
 * ends the wait at once: retrying would hide it behind warnings.
 */
export async function untilReachable<T>(
  what: string,
  attempt: () => Promise<T>,
  opts: UntilReachableOptions,
): Promise<T> {
  let retryMs = FIRST_RETRY_MS;
  for (;;) {
    if (opts.stopping()) throw new StoppedWaiting();
    try {
      return await attempt();
    } catch (err) {
      if (!opts.isTransient(err) || opts.stopping()) throw err;
      opts.logger.warn(
        { err: (err as Error)?.message ?? String(err), retryInMs: retryMs },
        `${what}: PostgreSQL or NATS is not reachable; trying again`,
      );
    }
    const until = Date.now() + retryMs;
    while (Date.now() < until && !opts.stopping())
      await new Promise((r) => setTimeout(r, Math.min(100, until - Date.now())));
    retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
  }
}
