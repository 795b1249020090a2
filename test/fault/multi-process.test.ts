import t from 'tap';
import { startDeployment } from '../harness/deployment.ts';
import { startTestEngines } from '../harness/engines.ts';
import { startReceiver } from '../harness/receiver.ts';
import { waitFor } from '../harness/service.ts';
import { audit, createClient, FAST_ENV, startFeedWalker, startFlood } from '../harness/workload.ts';

// Several ENS processes or a three-node cluster starting beside another heavy file can take most
// of the default 120 s on two cores: this file gets twice that.
t.setTimeout(240_000);

/**
 * The deployment platform teams run: two api, two worker, two callbacks and two feed processes,
 * one PostgreSQL, one NATS. While handoffs stream in and a caller walks the feed, one process of
 * each role is killed with kill -9 and started again. Every accepted delivery ends, every ended
 * delivery's callback is posted or dead-lettered, no delivery has two successful sends, and the
 * feed walk skips nothing. Repeated sends and posts (at-least-once) are counted and reported.
 */
t.test('kill -9 one process of each role in turn, under load', async (t) => {
  const engines = await startTestEngines(t);
  const receiver = await startReceiver(t);
  const d = await startDeployment(t, {
    databaseUrl: engines.databaseUrl,
    natsUrl: engines.natsUrl,
    counts: { api: 2, worker: 2, callbacks: 2, feed: 2 },
    env: FAST_ENV,
  });
  const client = await createClient(d);
  const flood = await startFlood(d, client, receiver.url, 3);
  const walker = startFeedWalker(d, client);
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  await pause(1500);
  for (const role of ['api', 'worker', 'callbacks', 'feed'] as const) {
    const victim = d.nodes.find((n) => n.role === role)!;
    await victim.kill9();
    await pause(1000);
    await victim.start();
    await pause(1000);
  }
  await flood.stop();
  t.ok(flood.accepted > 50, `${flood.accepted} handoffs accepted during the faults`);
  const final = await waitFor(
    async () => {
      const a = await audit(engines.databaseUrl, receiver.posts);
      return a.stranded === 0 && a.callbacksLost === 0 ? a : undefined;
    },
    90_000,
    'every delivery to end and every callback to be posted or dead-lettered',
  );
  const skipped = await walker.stop(engines.databaseUrl);
  t.equal(final.deliveries, flood.accepted * 2, 'two deliveries per accepted handoff');
  t.equal(final.stranded, 0, 'no delivery stranded');
  t.equal(final.callbacksLost, 0, 'no callback lost');
  t.equal(final.doubleSuccess, 0, 'no delivery has two successful sends');
  t.equal(skipped, 0, 'the feed walk skipped no change');
  t.comment(
    `repeated sends (attempts cut off by kill -9): ${final.repeatedSends}; repeated posts: ${final.repeatedPosts}; callbacks posted ${final.callbacksPosted}, dead ${final.callbacksDead}`,
  );
});
