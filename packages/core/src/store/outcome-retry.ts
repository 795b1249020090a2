import type { Logger } from 'pino';

/*
 * An outcome that could not be recorded (PostgreSQL restarting or failing over) is kept and tried
 * again, instead of being dropped to the lease (issue 26). Dropped, its work-queue message went back
 * to the queue, the redelivery found the work still leased by the very attempt that had ended, and
 * the work waited out its lease (ENS_LEASE, 60 s) and then the sweeper.
 *
 * Trying again is safe because every outcome is a versioned update: once the lease has run out and
 * another attempt has claimed the work, a late record changes nothing. It is bounded by the lease
 * all the same, since past it the work belongs to whoever claims it next. A record that succeeds at
 * once costs nothing more than before: no extra write, no timer.
 */

/** Waits between tries: short first (a blip), then every 2 s, so a return is noticed quickly. */
const BACKOFF_MS = [100, 250, 500, 1_000, 2_000];

export interface OutcomeRetryOptions {
  /** Date.now() at which the claim's lease runs out: no try starts after it. */
  deadline: number;
  /** Called before each try after the first: keeps the work-queue message from redelivery. */
  keepAlive: () => void;
  logger: Logger;
  /** Names the work in the log lines (a delivery or callback id). */
  context: Record<string, unknown>;
}

/**
 * Runs `record` until it succeeds or the lease is spent, backing off between tries; returns its
 * result, or throws its last error once no try is left. `record` must be a versioned write, so
 * that a try that lands after the work moved on changes nothing. The waits do not hold a stopping
 * process open: its session's end hands the work to others.
 */
export async function recordOutcome<T>(
  record: () => Promise<T>,
  opts: OutcomeRetryOptions,
): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      const out = await record();
      if (i > 0) opts.logger.info({ ...opts.context, tries: i + 1 }, 'outcome recorded late');
      return out;
    } catch (err) {
      const waitMs = BACKOFF_MS[Math.min(i, BACKOFF_MS.length - 1)]!;
      if (Date.now() + waitMs >= opts.deadline) {
        opts.logger.warn(
          { ...opts.context, err, tries: i + 1 },
          'could not record the outcome within its lease; left to the lease',
        );
        throw err;
      }
      if (i === 0)
        opts.logger.warn(
          { ...opts.context, err },
          'could not record the outcome; trying again until its lease runs out',
        );
      await new Promise((r) => setTimeout(r, waitMs).unref());
      opts.keepAlive();
    }
  }
}
