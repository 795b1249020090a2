import t from 'tap';
import pino from 'pino';
import { connect } from '@nats-io/transport-node';
import { consumeWorkQueue, ensureTopology, SEND_STREAM, sendConsumer } from '@ens/core/internal';
// Core's own publisher of wake-ups: no role may import it (test/architecture/wake-ups.test.ts).
import { wakeSenders } from '../../packages/core/src/nats/wakeups.ts';
import { startNatsCluster } from '../harness/nats-cluster.ts';
import { leadersAgain } from '../harness/leader-faults.ts';
import { waitFor } from '../harness/service.ts';

/**
 * Send wake-ups published steadily (200 a second) while the send stream's leader is asked to step
 * down three times, then while the node leading it is killed. A plain publish while the stream has
 * no leader is stored by nobody: each step-down lost the wake-ups of its few milliseconds, and the
 * kill those of its whole election (4.7-8.6 s here), each left for the sweeper (30 s). Every
 * wake-up must arrive, within seconds of the stream having a leader again.
 */
const logger = pino({ level: process.env.LOOP_LOG ?? 'silent' }, pino.destination(2));

t.test(
  'wake-ups published across stream leader step-downs and a killed stream leader',
  async (t) => {
    const cluster = await startNatsCluster(t, 3);
    const nc = await connect({
      servers: cluster.url.split(','),
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
    });
    t.teardown(() => nc.close());
    await ensureTopology(nc, 3);
    const reader = await connect({
      servers: cluster.url.split(','),
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
    });
    t.teardown(() => reader.close());

    const publishedAt = new Map<string, number>();
    const arrivedAt = new Map<string, number>();
    const loop = await consumeWorkQueue({
      js: await ensureTopology(reader, 3),
      nc: reader,
      stream: SEND_STREAM,
      durable: sendConsumer('sms', 'next'),
      concurrency: 1000,
      logger,
      redeclare: () => ensureTopology(reader, 3),
      handle: async (m) => {
        const id = m.string().split(' ')[0]!;
        if (!arrivedAt.has(id)) arrivedAt.set(id, Date.now());
        m.ack();
      },
    });
    let n = 0;
    const ticker = setInterval(() => {
      const id = `d${++n}`;
      publishedAt.set(id, Date.now());
      wakeSenders(nc, [{ id, channel: 'sms', clientId: 'c', tenant: 't', eventType: 'e' }], logger);
    }, 5);
    t.teardown(() => clearInterval(ticker));
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    /**
     * The longest a wake-up published in [from, to) waited to arrive (until now, if it has not).
     */
    const worstWait = (from: number, to: number) => {
      const now = Date.now();
      let worst = 0;
      for (const [id, at] of publishedAt)
        if (at >= from && at < to) worst = Math.max(worst, (arrivedAt.get(id) ?? now) - at);
      return worst;
    };

    await pause(1_500);
    const stepDowns: number[] = [];
    for (let i = 0; i < 3; i++) {
      stepDowns.push(Date.now());
      const r = await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${SEND_STREAM}`, '', {
        timeout: 5_000,
      });
      t.match(r.json(), { success: true }, `step-down ${i + 1}`);
      await pause(1_500);
    }
    const leader = await cluster.leaderOf(SEND_STREAM);
    const lost = `n${cluster.nodes.indexOf(leader) + 1}`;
    const killedAt = Date.now();
    await leader.kill9();
    const electedAt = await leadersAgain(cluster.url, lost, SEND_STREAM, [
      sendConsumer('sms', 'next'),
    ]);
    await pause(2_000);
    clearInterval(ticker);
    const last = Date.now();
    await waitFor(
      async () => [...publishedAt.keys()].every((id) => arrivedAt.has(id)),
      35_000,
      'every wake-up to arrive',
    ).catch(() => {});
    await loop.stop(1_000);

    const missing = [...publishedAt.keys()].filter((id) => !arrivedAt.has(id));
    t.same(
      missing.slice(0, 10),
      [],
      `every one of ${publishedAt.size} wake-ups arrived (${missing.length} did not)`,
    );
    for (const [i, at] of stepDowns.entries()) {
      const worst = worstWait(at - 200, at + 1_500);
      t.comment(`step-down ${i + 1}: longest wait ${worst} ms`);
      t.ok(
        worst < 3_000,
        `a wake-up published around step-down ${i + 1} arrived within ${worst} ms`,
      );
    }
    const worst = worstWait(killedAt - 200, last);
    const afterElection = worst - (electedAt - killedAt);
    t.comment(
      `kill: the stream and the consumer had leaders again after ${electedAt - killedAt} ms; longest wait ${worst} ms`,
    );
    t.ok(
      afterElection < 3_000,
      `a wake-up published during the election arrived ${afterElection} ms after it ended`,
    );
  },
);
