/**
 * Peer child "BullMQ": jobs in Redis. POST /messages validates the body and adds one job per
 * recipient with Queue.addBulk (one round trip of pipelined commands), answering 202 once Redis has
 * them. In the same process a Worker with concurrency 64 runs each job: the no-op send, then one
 * INSERT of the outcome in PostgreSQL (the durable record a team keeps, since Redis is not it).
 *
 * Job options as BullMQ's production guide has them: a few attempts with exponential back-off, and
 * completed/failed jobs trimmed so Redis does not grow with every message ever sent.
 * Concurrency 64 as the issue measured it; the pg pool (PEER_PG_POOL, 16) is what the same two
 * cores' PostgreSQL commits well; jobs beyond it wait for a connection, not for CPU.
 *
 * Environment: PEER_DATABASE_URL, PEER_SCHEMA, PEER_PG_POOL, PEER_CONCURRENCY, PEER_REDIS_URL,
 * PEER_QUEUE.
 */
import pg from 'pg';
import { Redis } from 'ioredis';
import { Queue, Worker } from 'bullmq';
import { jobsOf, serveUntilTold, startIntake } from './intake.ts';
import { peerSetting, sendAndRecord, type SendJob } from './outcome.ts';

const schema = peerSetting('PEER_SCHEMA');
const redisUrl = peerSetting('PEER_REDIS_URL');
const queueName = peerSetting('PEER_QUEUE');
const db = new pg.Pool({
  connectionString: peerSetting('PEER_DATABASE_URL'),
  max: Number(peerSetting('PEER_PG_POOL')),
  application_name: 'peer-bullmq',
});
// An idle connection dropped by the server is replaced on next use; say so rather than crash.
db.on('error', (err) => process.stderr.write(`pg pool: ${err.message}\n`));

// The producer fails fast when Redis is away (an HTTP caller should get an error, not wait);
// the worker's connection must retry forever, as BullMQ requires.
const producer = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
const consumer = new Redis(redisUrl, { maxRetriesPerRequest: null });
const queue = new Queue<SendJob>(queueName, {
  connection: producer,
  defaultJobOptions: {
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
    removeOnComplete: { count: 1000 },
    removeOnFail: { count: 5000 },
  },
});
const worker = new Worker<SendJob>(
  queueName,
  async (job) => sendAndRecord(db, schema, job.id!, job.data),
  {
    connection: consumer,
    concurrency: Number(peerSetting('PEER_CONCURRENCY')),
  },
);
worker.on('failed', (job, err) =>
  process.stderr.write(`[bullmq] job ${job?.id} failed: ${err.message}\n`),
);
await worker.waitUntilReady();

const intake = await startIntake(async (body) => {
  const jobs = jobsOf(body);
  await queue.addBulk(jobs.map((data) => ({ name: 'send', data })));
  return jobs.length;
});

serveUntilTold(intake.port, async () => {
  await intake.close();
  await worker.close();
  await queue.close();
  producer.disconnect();
  consumer.disconnect();
  await db.end();
});
