import type { Logger } from 'pino';
import { jobDuration, jobFailures, jobLastRun } from '../metrics.ts';
import type { Job } from './job.ts';

/*
 * Each job runs on its own timer, so one that fails (PostgreSQL away) or runs long delays none of
 * the others, and every pass is measured the same way: /metrics shows when each job last ran
 * (ens_job_last_run_timestamp_seconds), how long its passes take (ens_job_duration_seconds) and
 * how many failed (ens_job_failures_total), so a job that stopped or keeps failing is seen.
 */

export interface RunningJobs {
  /** Stops the timers; resolves when the passes under way have ended (callers may not wait). */
  stop(): Promise<void>;
}

/**
 * One pass of `job`, measured and never throwing: a failure is counted and logged as the job's
 * warning. The last-run time is set when the pass ends, whatever its outcome.
 */
export async function runJob(job: Job, logger: Logger): Promise<void> {
  const labels = { job: job.name };
  const done = jobDuration.startTimer(labels);
  try {
    await job.run();
  } catch (err) {
    jobFailures.inc(labels);
    logger.warn({ err, job: job.name }, job.failureMessage);
  } finally {
    done();
    jobLastRun.set(labels, Date.now() / 1000);
  }
}

/**
 * Starts each job, now (or after one interval, if it says so) and then every `everyMs`. Never
 * throws. The timers do not keep the process alive on their own.
 */
export function startJobs(jobs: readonly Job[], logger: Logger): RunningJobs {
  const underWay = new Set<Promise<void>>();
  let stopped = false;
  const timers = jobs.map((job) => {
    let last: Promise<void> | null = null;
    const pass = () => {
      if (stopped || (job.oneAtATime && last)) return;
      const p: Promise<void> = runJob(job, logger).finally(() => {
        underWay.delete(p);
        if (last === p) last = null;
      });
      last = p;
      underWay.add(p);
    };
    const timer = setInterval(pass, job.everyMs);
    timer.unref();
    if (job.firstPass !== 'after-interval') pass();
    return timer;
  });
  return {
    async stop() {
      stopped = true;
      for (const t of timers) clearInterval(t);
      await Promise.all(underWay);
    },
  };
}
