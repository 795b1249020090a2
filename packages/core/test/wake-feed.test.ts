import t from 'tap';
import type { NatsConnection } from '@nats-io/transport-node';
import { FEED_WAKE_SUBJECT } from '@ens/core/internal';
// Core's own: no role publishes a wake-up (test/architecture/wake-ups.test.ts).
import { wakeFeed } from '../src/nats/wakeups.ts';

const nextTurn = () => new Promise((r) => setImmediate(r));

function fakeNats(fail = false) {
  const published: string[] = [];
  const nc = {
    publish: (subject: string) => {
      if (fail) throw new Error('connection closed');
      published.push(subject);
    },
  } as unknown as NatsConnection;
  return { nc, published };
}

t.test(
  'wake-ups within one turn of the event loop publish once, also across microtasks',
  async (t) => {
    const { nc, published } = fakeNats();
    wakeFeed(nc);
    wakeFeed(nc);
    await Promise.resolve();
    wakeFeed(nc);
    t.same(published, [], 'nothing is published synchronously');
    await nextTurn();
    t.same(published, [FEED_WAKE_SUBJECT]);
    wakeFeed(nc);
    await nextTurn();
    t.same(published, [FEED_WAKE_SUBJECT, FEED_WAKE_SUBJECT], 'the next turn publishes again');
  },
);

t.test('each connection gets its own wake-up', async (t) => {
  const a = fakeNats();
  const b = fakeNats();
  wakeFeed(a.nc);
  wakeFeed(b.nc);
  await nextTurn();
  t.equal(a.published.length, 1);
  t.equal(b.published.length, 1);
});

t.test('a closed connection neither throws nor blocks later wake-ups', async (t) => {
  const { nc } = fakeNats(true);
  t.doesNotThrow(() => wakeFeed(nc));
  await nextTurn();
  const ok = fakeNats();
  wakeFeed(ok.nc);
  await nextTurn();
  t.equal(ok.published.length, 1);
});
