/**
 * Peer child "graphile-worker": jobs in the same PostgreSQL. POST /messages validates the body and
 * adds one job per recipient in one statement (WorkerUtils.addJobs, i.e. graphile_worker.add_jobs,
 * the bulk API of the current releases), answering 202 once that statement committed. In the same
 * process a worker pool runs the `send` task: the no-op send, then one INSERT of the outcome.
 *
 * Concurrency 32 (PEER_CONCURRENCY): each job is two short PostgreSQL round trips (the outcome
 * INSERT, then graphile's complete_job), so 32 in flight keep two cores' worth of PostgreSQL busy
 * and feed its group commit; more only queue on the same two cores. The pool is concurrency + 8,
 * as graphile-worker advises "concurrentJobs + 2" or more when tasks use the pool too.
 *
 * PEER_BATCHED=1 turns on what graphile-worker's performance guide advises for high throughput: a
 * local queue (jobs fetched and locked in batches of concurrency + 1) and batched completion
 * (completeJobBatchDelay 0). Without it: the library's defaults, one fetch and one completion per
 * job.
 *
 * Environment: PEER_DATABASE_URL, PEER_SCHEMA, PEER_CONCURRENCY, PEER_BATCHED.
 */
import pg from 'pg';
import { Logger, makeWorkerUtils, run, runMigrations, type Task } from 'graphile-worker';
import { jobsOf, serveUntilTold, startIntake } from './intake.ts';
import { peerSetting, sendAndRecord, type SendJob } from './outcome.ts';

const schema = peerSetting('PEER_SCHEMA');
const concurrency = Number(peerSetting('PEER_CONCURRENCY'));
const batched = process.env.PEER_BATCHED === '1';
const db = new pg.Pool({
  connectionString: peerSetting('PEER_DATABASE_URL'),
  max: concurrency + 8,
  application_name: 'peer-graphile-worker',
});
// An idle connection dropped by the server is replaced on next use; say so rather than crash.
db.on('error', (err) => process.stderr.write(`pg pool: ${err.message}\n`));
// ...and the same for a checked-out client, as graphile-worker asks of a pool it is given.
db.on('connect', (client) =>
  client.on('error', (err) => process.stderr.write(`pg client: ${err.message}\n`)),
);

// graphile-worker logs every job at info; keep warnings and errors only, as ENS runs at warn.
const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning')
    process.stderr.write(`[graphile-worker ${level}] ${message}\n`);
});

await runMigrations({ pgPool: db, logger });
const utils = await makeWorkerUtils({ pgPool: db, logger });

const send: Task = async (payload, helpers) => {
  await sendAndRecord(db, schema, String(helpers.job.id), payload as SendJob);
};

const runner = await run({
  pgPool: db,
  logger,
  concurrency,
  noHandleSignals: true,
  taskList: { send },
  ...(batched
    ? { preset: { worker: { localQueue: { size: concurrency + 1 }, completeJobBatchDelay: 0 } } }
    : {}),
});

const intake = await startIntake(async (body) => {
  const jobs = jobsOf(body);
  await utils.addJobs(jobs.map((payload) => ({ identifier: 'send', payload })));
  return jobs.length;
});

serveUntilTold(intake.port, async () => {
  await intake.close();
  await runner.stop();
  await utils.release();
  await db.end();
});
