import t from 'tap';
import { pino } from 'pino';
import { metricsText } from '@ens/core';
import { callbacksJobs, JOB_EVERY_MS, startJobs, workerJobs, type Job } from '@ens/core/internal';

/**
 * The jobs scheduler (packages/core/src/jobs/scheduler.ts): every periodic job on its own timer,
 * a failure logged and tried again, and each pass shown in /metrics by the job's name.
 */

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits for a condition rather than a fixed time: a loaded machine delays timers, not outcomes. */
async function until(cond: () => boolean, timeoutMs = 10_000): Promise<boolean> {
  for (const end = Date.now() + timeoutMs; !cond() && Date.now() < end; ) await pause(10);
  return cond();
}

/** A logger that keeps the warnings it is given. */
function recordingLogger() {
  const warnings: { job?: string; msg: string }[] = [];
  const logger = pino(
    { level: 'warn' },
    { write: (line: string) => void warnings.push(JSON.parse(line)) },
  );
  return { logger, warnings };
}

/** A job's series as /metrics shows them (the text the endpoint serves). */
async function seen(
  job: string,
): Promise<{ lastRun: number | null; passes: number; failures: number }> {
  const text = await metricsText();
  const value = (re: RegExp) => {
    const m = re.exec(text);
    return m ? Number(m[1]) : null;
  };
  return {
    lastRun: value(
      new RegExp(`^ens_job_last_run_timestamp_seconds\\{job="${job}"\\} (\\S+)$`, 'm'),
    ),
    passes:
      value(new RegExp(`^ens_job_duration_seconds_count\\{job="${job}"\\} (\\S+)$`, 'm')) ?? 0,
    failures: value(new RegExp(`^ens_job_failures_total\\{job="${job}"\\} (\\S+)$`, 'm')) ?? 0,
  };
}

t.test('each job runs at once and then on its own interval; stop ends them', async (t) => {
  const { logger } = recordingLogger();
  const runs = { fast: 0, slow: 0 };
  const job = (name: 'fast' | 'slow', everyMs: number): Job => ({
    name,
    everyMs,
    failureMessage: `${name} failed`,
    run: async () => void runs[name]++,
  });
  const jobs = startJobs([job('fast', 20), job('slow', 60_000)], logger);
  t.ok(
    await until(() => runs.fast >= 3),
    `the fast job ran at the start and on every turn (${runs.fast})`,
  );
  await jobs.stop();
  t.equal(runs.slow, 1, 'the slow job ran once, at the start');
  const after = runs.fast;
  await pause(60);
  t.equal(runs.fast, after, 'no pass after stop');
});

t.test(
  'a job that fails is logged with its own warning and stops neither itself nor the others',
  async (t) => {
    const { logger, warnings } = recordingLogger();
    let broken = 0;
    let healthy = 0;
    const jobs = startJobs(
      [
        {
          name: 'broken',
          everyMs: 20,
          failureMessage: 'broken job failed',
          run: async () => {
            broken++;
            throw new Error('database is away');
          },
        },
        {
          name: 'healthy',
          everyMs: 20,
          failureMessage: 'healthy job failed',
          run: async () => void healthy++,
        },
      ],
      logger,
    );
    t.ok(
      await until(() => broken >= 3 && healthy >= 3),
      'the failing job is tried again, and the other keeps running',
    );
    await jobs.stop();
    t.ok(warnings.length >= 3);
    t.ok(warnings.every((w) => w.job === 'broken' && w.msg === 'broken job failed'));
  },
);

t.test(
  '/metrics shows when a job last ran, how long its passes took, and how many failed',
  async (t) => {
    const { logger } = recordingLogger();
    let fail = false;
    const job: Job = {
      name: 'metrics-probe',
      everyMs: 60_000,
      failureMessage: 'probe failed',
      run: async () => {
        await pause(15);
        if (fail) throw new Error('database is away');
      },
    };
    const before = await seen('metrics-probe');
    t.same(before, { lastRun: null, passes: 0, failures: 0 }, 'nothing before the first pass');

    const startedAt = Date.now() / 1000;
    // The first pass starts at once; stop waits for it to end.
    let jobs = startJobs([job], logger);
    await jobs.stop();
    const ran = await seen('metrics-probe');
    t.equal(ran.passes, 1, 'a pass is counted');
    t.equal(ran.failures, 0, 'a pass that succeeded is no failure');
    t.ok(
      ran.lastRun !== null && ran.lastRun >= startedAt && ran.lastRun <= Date.now() / 1000,
      'the last run is the time the pass ended',
    );
    const text = await metricsText();
    const sum = Number(
      /^ens_job_duration_seconds_sum\{job="metrics-probe"\} (\S+)$/m.exec(text)?.[1],
    );
    t.ok(sum >= 0.01, `its duration is measured (${sum} s)`);

    fail = true;
    await pause(5);
    jobs = startJobs([job], logger);
    await jobs.stop();
    const failed = await seen('metrics-probe');
    t.equal(failed.passes, 2, 'a failed pass is a pass');
    t.equal(failed.failures, 1, 'and a failure');
    t.ok(failed.lastRun! > ran.lastRun!, 'the last run moves on a failed pass too');
  },
);

t.test(
  'a job may wait one interval for its first pass, and skip a pass while the last one runs',
  async (t) => {
    const { logger } = recordingLogger();
    let started = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const jobs = startJobs(
      [
        {
          name: 'slow-round',
          everyMs: 20,
          failureMessage: 'slow round failed',
          firstPass: 'after-interval',
          oneAtATime: true,
          run: async () => {
            started++;
            await held;
          },
        },
      ],
      logger,
    );
    t.equal(started, 0, 'no pass at the start');
    t.ok(await until(() => started === 1), 'the first pass after one interval');
    await pause(100);
    t.equal(started, 1, 'no second pass while the first one runs');
    let stopped = false;
    const stopping = jobs.stop().then(() => (stopped = true));
    await pause(20);
    t.notOk(stopped, 'stop waits for the pass under way');
    release();
    await stopping;
    t.equal(started, 1);
  },
);

t.test('every job the roles run is declared with its interval', async (t) => {
  const rt = {
    config: { sweepGraceMs: 1, idempotencyTtlMs: 1, mediaGraceMs: 1, retentionMs: 1 },
  } as unknown as Parameters<typeof workerJobs>[0] & Parameters<typeof callbacksJobs>[0];
  const jobs = [...workerJobs(rt), ...callbacksJobs(rt)];
  for (const job of jobs)
    t.equal(
      job.everyMs,
      JOB_EVERY_MS[job.name as keyof typeof JOB_EVERY_MS],
      `${job.name} runs at its declared interval`,
    );
  t.same(new Set(jobs.map((j) => j.name)).size, jobs.length, 'no job twice');
  const run = new Set([...jobs.map((j) => j.name), 'alert-evaluation']);
  t.same(
    Object.keys(JOB_EVERY_MS).filter((n) => !run.has(n)),
    [],
    'no declared job that nothing runs',
  );
});
