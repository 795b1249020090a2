import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import pino from 'pino';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { startNats } from '@ens/local-engines';
import { allLoops, consumeWorkQueue, handBack, type WorkQueueConsumer } from '@ens/core/internal';
import { scratchRoot } from '../harness/scratch-root.ts';
import { waitFor } from '../harness/service.ts';

/*
 * Issue 26: a stopping process hands back what it holds so that another sends it within seconds.
 * The fault test worker-sigterm-handback.test.ts lost part of a SIGTERM's hand-back (5-19 of 35
 * wake-ups) in CI and in 2 of 13 runs here: the worker nak'ed them while its own pulls were still
 * on the server, and on NATS 2.9.10 some nak'ed messages then went to no one and waited out the
 * ack wait. The second case is that loss on the consume loop alone: with naks, 1-3 of 1,000 were
 * missing in 3 of 4 runs; with hand-back.ts, none in 5 runs. Every message must be handled within
 * 10 s: a lost one waits out the ack wait (30 s here, 60 s in ENS), while a loaded machine needs
 * more than 3 s (a full run of the suite beside a soak: round 0 of the second case, old code).
 * The second case failed once more in CI (Node 20, round 2, 1 of 1,000 after the drain was
 * confirmed): the server had picked the stopping pull just before it heard the unsubscribe. Beside
 * three busy loops it failed 2 runs in 15; since a stop waits for its pulls to end, none in 12
 * runs of the second and third cases (work-queue.ts, unsubscribeFromServer).
 */
const ACK_WAIT_MS = 30_000;
const HANDED_BACK_WITHIN_MS = 10_000;
const logger = pino({ level: 'silent' });

async function bench(t: Test) {
  const dir = await mkdtemp(join(await scratchRoot(), 'ens-wq-stop-'));
  const nats = await startNats({ storeDir: join(dir, 'nats') });
  t.teardown(async () => {
    await nats.stop();
    await rm(dir, { recursive: true, force: true });
  });
  const connection = async () => {
    const nc = await connect({ servers: nats.url });
    t.teardown(() => nc.close());
    return nc;
  };
  const admin = await connection();
  const jsm = await jetstreamManager(admin);
  await jsm.streams.add({ name: 'T', subjects: ['t.x'], retention: RetentionPolicy.Workqueue });
  await jsm.consumers.add('T', {
    durable_name: 'c',
    ack_policy: AckPolicy.Explicit,
    ack_wait: ACK_WAIT_MS * 1_000_000,
    max_ack_pending: 10_000,
  });
  const js = jetstream(admin);
  /** A process's loop on the shared consumer, with its own connection. */
  const loop = async (
    handle: (m: JsMsg, nc: NatsConnection) => Promise<void>,
  ): Promise<WorkQueueConsumer> => {
    const nc = await connection();
    const consumer = await consumeWorkQueue({
      js: jetstream(nc),
      stream: 'T',
      durable: 'c',
      concurrency: 10_000,
      pullBatch: 50,
      handle: (m) => handle(m, nc),
      logger,
      redeclare: async () => {},
      nc,
    });
    // A failed case must not leave a loop running until the file's timeout.
    t.teardown(() => consumer.stop(1_000));
    return consumer;
  };
  /** Waits for the 1,000 published from `base` to be in `handled`; the error says how many are not. */
  const allHandled = (base: number, handled: Set<string>, round: number) => {
    const expected = Array.from({ length: 1000 }, (_, k) => String(base + k));
    const missing = () => expected.filter((k) => !handled.has(k)).length;
    const what = `round ${round}: all 1000 handled within ${HANDED_BACK_WITHIN_MS} ms`;
    return waitFor(async () => missing() === 0, HANDED_BACK_WITHIN_MS, what).catch(
      async (err: Error) => {
        const info = await jsm.consumers.info('T', 'c');
        const which = expected.filter((k) => !handled.has(k)).slice(0, 5);
        throw new Error(
          `${err.message} (${missing()} of 1000 missing: ${which.join(', ')}; the consumer has ` +
            `${info.num_ack_pending} unacknowledged, ${info.num_pending} pending, ` +
            `${info.num_waiting} pulls waiting)`,
        );
      },
    );
  };
  return {
    allHandled,
    js,
    loop,
    connection,
    publish: (n: number, from: number) =>
      Promise.all(Array.from({ length: n }, (_, i) => js.publish('t.x', String(from + i)))),
  };
}

t.test('work held when intake stops goes to the other process only', async (t) => {
  const b = await bench(t);
  const js = b.js;
  for (let round = 0; round < 5; round++) {
    const held: { m: JsMsg; done: () => void }[] = [];
    const stopping = await b.loop((m) => new Promise<void>((done) => held.push({ m, done })));
    await b.publish(200, round * 1000);
    await waitFor(async () => held.length === 200, 10_000, 'the first process to hold 200');
    const taken = new Set<string>();
    const other = await b.loop(async (m) => {
      taken.add(m.string());
      m.ack();
    });
    // As the worker's stop does: pulls end on the server first, then held work is handed back.
    await stopping.stopIntake();
    await Promise.all(held.map((h) => handBack(js, h.m, logger).finally(h.done)));
    await stopping.stop(1_000);
    const from = Date.now();
    await waitFor(
      async () => taken.size === 200,
      HANDED_BACK_WITHIN_MS,
      `round ${round}: all 200 handed back to the other process`,
    );
    t.pass(`round ${round}: 200 handed back, taken in ${Date.now() - from} ms`);
    await other.stop(1_000);
  }
});

t.test('what the server sends while intake stops is handed back, not dropped', async (t) => {
  const b = await bench(t);
  const handled = new Set<string>();
  const record = async (m: JsMsg) => {
    handled.add(m.string());
    m.ack();
  };
  for (let round = 0; round < 5; round++) {
    const first = await b.loop(record);
    const second = await b.loop(record);
    // Work arrives all the while, so the server has messages on their way to the stopping pull.
    const base = 10_000 * (round + 1);
    const publishing = (async () => {
      for (let i = 0; i < 20; i++) await b.publish(50, base + i * 50);
    })();
    await new Promise((r) => setTimeout(r, 20));
    await first.stopIntake();
    await publishing;
    await b.allHandled(base, handled, round);
    t.pass(`round ${round}: none waited for the ack wait`);
    await first.stop(1_000);
    await second.stop(1_000);
  }
});

/*
 * The same window opens whenever the loop ends a pull to pull again: a consumer's leader moved (the
 * leader-elected advisory), a reconnect, a stall. The soak's rounds 59 and 65 (a worker killed
 * while consumer leaders stepped down) saw the wake-ups for the killed worker's sends wait for the
 * sweeper: 46.1 s and 48.8 s. A leader-elected advisory is what the loop reacts to, and on one
 * server it can be sent by hand while the consume loop's pull is alive and being filled.
 */
t.test('what the server sends while the loop pulls again is handled, not dropped', async (t) => {
  const b = await bench(t);
  const handled = new Set<string>();
  await b.loop(async (m) => {
    handled.add(m.string());
    m.ack();
  });
  const announcer = await b.connection();
  for (let round = 0; round < 5; round++) {
    const base = 100_000 * (round + 1);
    let publishing = true;
    const published = (async () => {
      for (let i = 0; i < 20; i++) await b.publish(50, base + i * 50);
      publishing = false;
    })();
    while (publishing) {
      announcer.publish('$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.T.c', '{}');
      await new Promise((r) => setTimeout(r, 5));
    }
    await published;
    await b.allHandled(base, handled, round);
    t.pass(`round ${round}: none waited for the ack wait`);
  }
});

/*
 * The stall the watch could not see: in a soak round, worker-sms-bulk had 51 messages pending and
 * 2 pulls waiting, and delivered nothing for as long as it was watched, while both loops counted
 * as up (sends waited 32-54 s after a worker kill). How the server got there is not known; what
 * the loop must do is. Here the server is healthy and the watch is shown that frozen state (the
 * consumer's info with work pending, pulls waiting and a delivered sequence that stands still):
 * the loop must count as down until work comes again, pull again, and ask for a new consumer
 * leader.
 */
t.test(
  'work pending, pulls waiting, nothing delivered: down, pulling again, a new leader',
  async (t) => {
    const b = await bench(t);
    const nc = await b.connection();
    const real = jetstream(nc);
    const frozen = {
      num_pending: 51,
      num_waiting: 2,
      num_ack_pending: 148,
      delivered: { consumer_seq: 1000, stream_seq: 1000 },
    };
    const js = new Proxy(real, {
      get(target, prop, receiver) {
        if (prop !== 'jetstreamManager') return Reflect.get(target, prop, receiver);
        return async (...a: unknown[]) => {
          const jsm = await (
            target.jetstreamManager as (...x: unknown[]) => Promise<JetStreamManager>
          )(...a);
          return {
            consumers: {
              info: async (s: string, d: string) => ({
                ...(await jsm.consumers.info(s, d)),
                ...frozen,
              }),
            },
          };
        };
      },
    });
    const stepDowns: string[] = [];
    nc.subscribe('$JS.API.CONSUMER.LEADER.STEPDOWN.T.c', {
      callback: (_e, m) => {
        stepDowns.push(m.subject);
      },
    });
    const loop = await consumeWorkQueue({
      js,
      stream: 'T',
      durable: 'c',
      concurrency: 100,
      pullBatch: 10,
      handle: async (m) => m.ack(),
      logger: pino({ level: 'silent' }),
      redeclare: async () => {},
      nc,
      watchEveryMs: 200,
    });
    t.teardown(() => loop.stop(1_000));
    const reason = await waitFor(
      async () =>
        allLoops().find(
          (x) => x.stream === 'T' && x.consumer === 'c' && !x.up && x.reason !== 'starting',
        )?.reason ?? undefined,
      3_000,
      'the loop to count as down',
    );
    t.match(reason, /pulls get none of them/, `down, saying why: ${reason}`);
    // The new pull gets nothing either (as far as the watch is shown): the consumer's leader is
    // asked to step down.
    await waitFor(async () => stepDowns.length > 0, 3_000, 'a step-down request');
    t.pass('after pulling again to no avail, the loop asked the consumer to elect a new leader');
    // It pulled again and takes work: what is published now is handled.
    await b.publish(5, 900_000);
    const handled = await waitFor(
      async () => {
        const i = await (await jetstreamManager(nc)).consumers.info('T', 'c');
        return i.num_pending === 0 && i.num_ack_pending === 0 ? true : undefined;
      },
      5_000,
      'the 5 published after it to be handled',
    );
    t.ok(handled, 'the loop took work again after pulling again');
  },
);
