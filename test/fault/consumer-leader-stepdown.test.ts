import t from 'tap';
import { SEND_STREAM, sendConsumer } from '@ens/core/internal';
import { startNatsCluster } from '../harness/nats-cluster.ts';
import {
  consumerLeader,
  sampleHealth,
  stallSeen,
  startTrickle,
  stepDownConsumer,
  worstFirstAttemptGap,
} from '../harness/leader-faults.ts';
import { startTestService, waitFor } from '../harness/service.ts';

/**
 * The send consumers' JetStream leaders asked to step down (what a rolling NATS upgrade does),
 * nothing killed and no ENS connection dropped. The new leader knows nothing of the pulls the old
 * one held, so a process that waits on its old pull gets no work: an independent probe saw every
 * sms accepted over the next 33-35 s tried only then, while /readyz said ready and
 * ens_consumer_up said 1. Now a delivery accepted after the step-down waits seconds, and a wait of
 * 5 s or more shows in /readyz or ens_consumer_up.
 */
const CONSUMERS = [sendConsumer('sms', 'next'), sendConsumer('sms', 'bulk')];
/** What a caller may wait for a first attempt after a leader change. */
const MAX_GAP_MS = 10_000;
/** A wait this long must be visible to an operator. */
const VISIBLE_MS = 5_000;

t.test("the send consumers' leaders step down under a trickle of sms", async (t) => {
  const cluster = await startNatsCluster(t, 3);
  const svc = await startTestService(t, { natsUrl: cluster.url, env: { ENS_NATS_REPLICAS: '3' } });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const health = sampleHealth(svc);
  // One recipient a handoff wakes the first lane, eleven the bulk lane.
  const trickles = [
    startTrickle(svc, client, 'acme', { everyMs: 100, recipients: 1, from: 1 }),
    startTrickle(svc, client, 'acme', { everyMs: 500, recipients: 11, from: 5_000_000 }),
  ];
  await new Promise((r) => setTimeout(r, 3_000));

  const before = await Promise.all(
    CONSUMERS.map((c) => consumerLeader(cluster.url, SEND_STREAM, c)),
  );
  const steppedDown = Date.now();
  for (const c of CONSUMERS)
    t.match(
      await stepDownConsumer(cluster.url, SEND_STREAM, c),
      { success: true },
      `${c}'s leader stepped down`,
    );
  const after = await Promise.all(
    CONSUMERS.map((c) =>
      waitFor(
        async () => {
          const l = await consumerLeader(cluster.url, SEND_STREAM, c).catch(() => undefined);
          return l && l !== before[CONSUMERS.indexOf(c)] ? l : undefined;
        },
        15_000,
        `a new leader for ${c}`,
      ),
    ),
  );
  t.comment(`leaders ${before.join(', ')} -> ${after.join(', ')}`);

  await new Promise((r) => setTimeout(r, 10_000));
  const answers = await Promise.all(trickles.map((tr) => tr.stop()));
  t.same(
    answers.flatMap((a) => [...a.keys()]).filter((s) => s !== 202),
    [],
    'every handoff was accepted',
  );
  await waitFor(
    async () => {
      const r = await svc.rt.db.query<{ n: string }>(
        `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`,
      );
      return Number(r.rows[0]!.n) === 0;
    },
    45_000,
    'every delivery to end',
  );
  await health.stop();

  for (const recipients of [1, 11]) {
    const worst = (await worstFirstAttemptGap(svc, steppedDown, recipients))!;
    t.ok(worst, `deliveries of ${recipients}-recipient handoffs were accepted after the step-down`);
    t.comment(
      `${recipients}-recipient handoffs: longest wait for a first attempt after the step-down ${worst.gapMs} ms (accepted at +${worst.createdAt - steppedDown} ms)`,
    );
    t.ok(
      worst.gapMs < MAX_GAP_MS,
      `a delivery of a ${recipients}-recipient handoff waited ${worst.gapMs} ms for its first attempt (under ${MAX_GAP_MS})`,
    );
    if (worst.gapMs >= VISIBLE_MS) {
      const seen = stallSeen(health.samples, worst, CONSUMERS);
      t.ok(
        seen,
        `the ${worst.gapMs} ms wait showed in /readyz or ens_consumer_up${seen ? ` (at +${seen.at - worst.createdAt} ms)` : ''}`,
      );
    }
  }
});
