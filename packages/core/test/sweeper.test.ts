import t from 'tap';
import type { NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { CallbackStore, DeliveryStore, metricsRegistry } from '@ens/core';
import {
  purgeExpiredIdempotencyKeys,
  requeueOverdueCallbacks,
  requeueOverdueDeliveries,
  startJobs,
  type Db,
} from '@ens/core/internal';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A logger that keeps the warnings it is given. */
function recordingLogger() {
  const warnings: { job?: string; msg: string }[] = [];
  const logger = pino(
    { level: 'warn' },
    { write: (line: string) => void warnings.push(JSON.parse(line)) },
  );
  return { logger, warnings };
}

/**
 * A NATS connection that keeps what is published. The wake-up publisher also subscribes (for its
 * markers' answers and leader elections) and follows the connection's status: those are quiet here.
 */
function fakeNats() {
  const published: [string, string | undefined][] = [];
  const nc = {
    publish: (subject: string, data?: string) => void published.push([subject, data]),
    subscribe: () => ({ unsubscribe() {} }),
    status: () => (async function* () {})(),
    closed: () => new Promise(() => {}),
  } as unknown as NatsConnection;
  return { nc, published };
}

async function requeued(kind: string): Promise<number> {
  const m = (
    await metricsRegistry.getSingleMetric('ens_sweeper_requeued_total')!.get()
  ).values.find((v) => v.labels.kind === kind);
  return m?.value ?? 0;
}

t.test('overdue deliveries are woken on their channel queue and counted', async (t) => {
  const { logger } = recordingLogger();
  const { nc, published } = fakeNats();
  const asked: unknown[] = [];
  // The store wakes what it took, after its statement: a real one, over a database that answers the
  // rows.
  const db = {
    query: async (_sql: string, params: unknown[]) => {
      asked.push(params);
      return {
        rows: [
          {
            id: 'd1',
            channel: 'sms',
            clientId: 'ens_a',
            tenant: 'shop',
            eventType: 'order.shipped',
          },
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
  t.same(
    published,
    [
      ['ens.send.sms', 'd1 ens_a shop order.shipped'],
      ['ens.send.push', 'd2 ens_b bank otp code'],
    ],
    'each with its flow, for fair scheduling',
  );
  t.equal((await requeued('delivery')) - before, 2);
});

t.test(
  'overdue callbacks are woken on the callbacks queue with their client, and counted',
  async (t) => {
    const { logger } = recordingLogger();
    const { nc, published } = fakeNats();
    // The store wakes what it took, after its statement: a real one, over a database that answers
    // the rows.
    const db = {
      query: async () => ({
        rows: [
          { id: 'c1', clientId: 'ens_a' },
          { id: 'c2', clientId: 'ens_b' },
          { id: 'c3', clientId: 'ens_a' },
        ],
      }),
    } as unknown as Db;
    const callbacks = new CallbackStore(db, db, { nc, logger });
    const before = await requeued('callback');
    const job = requeueOverdueCallbacks({ callbacks }, 30_000);
    t.equal(job.everyMs, 2_000);
    await job.run();
    t.same(
      published,
      [
        ['ens.callbacks.post', 'c1 ens_a'],
        ['ens.callbacks.post', 'c2 ens_b'],
        ['ens.callbacks.post', 'c3 ens_a'],
      ],
      'each with its client, for fair posting',
    );
    t.equal((await requeued('callback')) - before, 3);
  },
);

t.test(
  'the idempotency key purge deletes keys past the retention, every ten minutes',
  async (t) => {
    const queries: unknown[][] = [];
    const db = {
      query: async (sql: string, params: unknown[]) => {
        queries.push([sql, params]);
        return { rowCount: 0 };
      },
    } as unknown as Db;
    const job = purgeExpiredIdempotencyKeys({ db }, 86_400_000);
    t.equal(job.everyMs, 600_000);
    await job.run();
    t.equal(queries.length, 1);
    t.match(String(queries[0]![0]), /DELETE FROM idempotency_keys/);
    t.same(queries[0]![1], [86_400_000]);
  },
);

t.test('the purge runs while the overdue-deliveries job cannot reach the database', async (t) => {
  const { logger } = recordingLogger();
  let purged = 0;
  const deliveries = {
    takeOverdue: async () => {
      throw new Error('connection refused');
    },
  } as unknown as DeliveryStore;
  const db = {
    query: async () => {
      purged++;
      return { rowCount: 0 };
    },
  } as unknown as Db;
  const jobs = startJobs(
    [
      requeueOverdueDeliveries({ deliveries, logger }, 1000),
      purgeExpiredIdempotencyKeys({ db }, 1000),
    ],
    logger,
  );
  await pause(20);
  await jobs.stop();
  t.equal(purged, 1);
});
