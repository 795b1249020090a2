import t from 'tap';
import type { NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { CallbackStore, DeliveryStore, metricsRegistry } from '@ens/core';
import {
  purgeExpiredIdempotencyKeys, requeueOverdueCallbacks, requeueOverdueDeliveries, startSweeper, type Db, type SweepJob,
} from '@ens/core/internal';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits for a condition rather than a fixed time: a loaded machine delays timers, not outcomes. */
async function until(cond: () => boolean, timeoutMs = 10_000): Promise<boolean> {
  for (const end = Date.now() + timeoutMs; !cond() && Date.now() < end; ) await pause(10);
  return cond();
}

/** A logger that keeps the warnings it is given. */
function recordingLogger() {
  const warnings: { job?: string; msg: string }[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line)) });
  return { logger, warnings };
}

function fakeNats() {
  const published: [string, string | undefined][] = [];
  const nc = { publish: (subject: string, data?: string) => void published.push([subject, data]) } as unknown as NatsConnection;
  return { nc, published };
}

async function requeued(kind: string): Promise<number> {
  const m = (await metricsRegistry.getSingleMetric('ens_sweeper_requeued_total')!.get()).values.find((v) => v.labels.kind === kind);
  return m?.value ?? 0;
}

t.test('each job runs at once and then on its own interval; stop ends them', async (t) => {
  const { logger } = recordingLogger();
  const runs = { fast: 0, slow: 0 };
  const job = (name: 'fast' | 'slow', everyMs: number): SweepJob => ({ name, everyMs, failureMessage: `${name} failed`, run: async () => void runs[name]++ });
  const sweeper = startSweeper([job('fast', 20), job('slow', 60_000)], logger);
  t.ok(await until(() => runs.fast >= 3), `the fast job ran at the start and on every turn (${runs.fast})`);
  sweeper.stop();
  t.equal(runs.slow, 1, 'the slow job ran once, at the start');
  const after = runs.fast;
  await pause(60);
  t.equal(runs.fast, after, 'no pass after stop');
});

t.test('a job that fails is logged with its own warning and stops neither itself nor the others', async (t) => {
  const { logger, warnings } = recordingLogger();
  let broken = 0;
  let healthy = 0;
  const sweeper = startSweeper(
    [
      { name: 'broken', everyMs: 20, failureMessage: 'broken job failed', run: async () => { broken++; throw new Error('database is away'); } },
      { name: 'healthy', everyMs: 20, failureMessage: 'healthy job failed', run: async () => void healthy++ },
    ],
    logger,
  );
  t.ok(await until(() => broken >= 3 && healthy >= 3), 'the failing job is tried again, and the other keeps running');
  sweeper.stop();
  t.ok(warnings.length >= 3);
  t.ok(warnings.every((w) => w.job === 'broken' && w.msg === 'broken job failed'));
});

t.test('overdue deliveries are woken on their channel queue and counted', async (t) => {
  const { logger } = recordingLogger();
  const { nc, published } = fakeNats();
  const asked: unknown[] = [];
  // The store wakes what it took, after its statement: a real one, over a database that answers the rows.
  const db = {
    query: async (_sql: string, params: unknown[]) => {
      asked.push(params);
      return {
        rows: [
          { id: 'd1', channel: 'sms', clientId: 'ens_a', tenant: 'shop', eventType: 'order.shipped' },
          { id: 'd2', channel: 'push', clientId: 'ens_b', tenant: 'bank', eventType: 'otp code' },
        ],
      };
    },
  } as unknown as Db;
  const deliveries = new DeliveryStore(db, {}, { nc, logger });
  const before = await requeued('delivery');
  const job = requeueOverdueDeliveries({ deliveries, logger }, 30_000);
  t.equal(job.everyMs, 2_000);
  await job.run();
  t.same(asked, [[30_000, 1000]], 'the grace and the batch size');
  t.same(published, [['ens.send.sms', 'd1 ens_a shop order.shipped'], ['ens.send.push', 'd2 ens_b bank otp code']], 'each with its flow, for fair scheduling');
  t.equal((await requeued('delivery')) - before, 2);
});

t.test('overdue callbacks are woken on the callbacks queue with their client, and counted', async (t) => {
  const { logger } = recordingLogger();
  const { nc, published } = fakeNats();
  // The store wakes what it took, after its statement: a real one, over a database that answers the rows.
  const db = { query: async () => ({ rows: [{ id: 'c1', clientId: 'ens_a' }, { id: 'c2', clientId: 'ens_b' }, { id: 'c3', clientId: 'ens_a' }] }) } as unknown as Db;
  const callbacks = new CallbackStore(db, db, { nc, logger });
  const before = await requeued('callback');
  const job = requeueOverdueCallbacks({ callbacks }, 30_000);
  t.equal(job.everyMs, 2_000);
  await job.run();
  t.same(published, [['ens.callbacks.post', 'c1 ens_a'], ['ens.callbacks.post', 'c2 ens_b'], ['ens.callbacks.post', 'c3 ens_a']], 'each with its client, for fair posting');
  t.equal((await requeued('callback')) - before, 3);
});

t.test('the idempotency key purge deletes keys past the retention, every ten minutes', async (t) => {
  const queries: unknown[][] = [];
  const db = { query: async (sql: string, params: unknown[]) => { queries.push([sql, params]); return { rowCount: 0 }; } } as unknown as Db;
  const job = purgeExpiredIdempotencyKeys({ db }, 86_400_000);
  t.equal(job.everyMs, 600_000);
  await job.run();
  t.equal(queries.length, 1);
  t.match(String(queries[0]![0]), /DELETE FROM idempotency_keys/);
  t.same(queries[0]![1], [86_400_000]);
});

t.test('the purge runs while the overdue-deliveries job cannot reach the database', async (t) => {
  const { logger } = recordingLogger();
  let purged = 0;
  const deliveries = { takeOverdue: async () => { throw new Error('connection refused'); } } as unknown as DeliveryStore;
  const db = { query: async () => { purged++; return { rowCount: 0 }; } } as unknown as Db;
  const sweeper = startSweeper([requeueOverdueDeliveries({ deliveries, logger }, 1000), purgeExpiredIdempotencyKeys({ db }, 1000)], logger);
  await pause(20);
  sweeper.stop();
  t.equal(purged, 1);
});
