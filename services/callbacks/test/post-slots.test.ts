import t from 'tap';
import { PostDeferred, PostSlots, type PostSlotsOptions } from '../src/post-slots.ts';

/** Slots whose posts are never slow unless the test says so. */
const slotsOf = (size: number, perClient: number, slow: Partial<PostSlotsOptions> = {}) =>
  new PostSlots({
    size,
    perClient,
    slowPostMs: Infinity,
    maxWaitMs: 0,
    maxDeferMs: 60_000,
    ...slow,
  });

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs fn in a slot as a post whose receiver's part is all of fn. */
const posting = <T>(slots: PostSlots, client: string, fn: () => Promise<T>) =>
  slots.run(client, (receiver) => {
    receiver.begin();
    return fn();
  });

/** A post that runs until `finish` is called. */
function gate(): { wait: Promise<void>; finish: () => void } {
  let finish!: () => void;
  const wait = new Promise<void>((r) => (finish = r));
  return { wait, finish };
}

t.test('one client holds at most its share; another client starts at once beside it', async (t) => {
  const slots = slotsOf(4, 2);
  const started: string[] = [];
  const g = gate();
  const post = (client: string, n: number) =>
    posting(slots, client, async () => {
      started.push(`${client}${n}`);
      await g.wait;
    });
  const all = [post('a', 1), post('a', 2), post('a', 3), post('a', 4), post('b', 1)];
  await pause(5);
  t.same(
    started,
    ['a1', 'a2', 'b1'],
    "a's third and fourth posts wait for a's own share; b's goes into a free slot",
  );
  t.equal(slots.waiting, 2);
  g.finish();
  await Promise.all(all);
  t.same(started, ['a1', 'a2', 'b1', 'a3', 'a4'], 'they run once a post of a ends');
  t.equal(slots.waiting, 0);
});

t.test('waiting posts of different clients take free slots in turn', async (t) => {
  const slots = slotsOf(1, 1);
  const order: string[] = [];
  const post = (client: string, n: number) =>
    posting(slots, client, async () => {
      order.push(`${client}${n}`);
      await pause(1);
    });
  // a arrives first with four posts, b and c after it with two each.
  const all = [
    post('a', 1),
    post('a', 2),
    post('a', 3),
    post('a', 4),
    post('b', 1),
    post('b', 2),
    post('c', 1),
    post('c', 2),
  ];
  await Promise.all(all);
  t.same(
    order,
    ['a1', 'b1', 'c1', 'a2', 'b2', 'c2', 'a3', 'a4'],
    'one post per client per turn, not arrival order',
  );
});

t.test('a post that throws gives its slot back', async (t) => {
  const slots = slotsOf(1, 1);
  await t.rejects(
    posting(slots, 'a', async () => {
      throw new Error('receiver gone');
    }),
    /receiver gone/,
  );
  t.equal(await posting(slots, 'a', async () => 'next'), 'next');
});

t.test(
  "an arrival is handed back only behind its own client's slow posts, for about its wait, " +
    'spread out',
  async (t) => {
    const slots = slotsOf(8, 2, { slowPostMs: 20, maxWaitMs: 100 });
    t.equal(slots.deferral('a'), 0, 'an unknown client waits for nothing');
    const g = gate();
    const running = [posting(slots, 'a', () => g.wait), posting(slots, 'a', () => g.wait)];
    t.equal(slots.deferral('a'), 0, 'posts that have just started are not slow');
    const parked = [posting(slots, 'a', async () => {}), posting(slots, 'a', async () => {})];
    await pause(60);
    // Two parked posts fill one round of a's share; an arrival waits for a second round of posts
    // about 60 ms old (none has ended, so their age is the estimate): about 120 ms, over 100.
    const first = slots.deferral('a');
    t.ok(
      first >= 2 * 55 && first < 2 * 200,
      `handed back for two rounds of about 60 ms (${first} ms)`,
    );
    const second = slots.deferral('a');
    const third = slots.deferral('a');
    t.ok(second >= first, `the next counts the first as ahead of it (${second} ms)`);
    t.ok(third > first, `a round later comes back later (${third} ms)`);
    t.equal(slots.deferral('b'), 0, 'another client waits for none of it');
    g.finish();
    await Promise.all([...running, ...parked]);
    t.equal(slots.deferral('a'), 0, 'below its share again');
  },
);

t.test('a handed-back post is kept out for at most maxDeferMs', async (t) => {
  const slots = slotsOf(4, 1, { slowPostMs: 10, maxWaitMs: 10, maxDeferMs: 50 });
  const g = gate();
  const running = posting(slots, 'a', () => g.wait);
  await pause(40);
  const delays = Array.from({ length: 20 }, () => slots.deferral('a'));
  t.ok(
    delays.every((d) => d > 0 && d <= 50),
    `each at most 50 ms (${delays.join(', ')})`,
  );
  g.finish();
  await running;
});

t.test(
  "only the receiver's part counts: a slow claim before it does not make a client slow",
  async (t) => {
    const slots = slotsOf(4, 1, { slowPostMs: 20, maxWaitMs: 10 });
    const g = gate();
    const running = slots.run('a', async (receiver) => {
      await g.wait; // the claim, say, held up by the database
      receiver.begin();
    });
    await pause(60);
    t.equal(slots.deferral('a'), 0, 'not slow while the receiver has not been asked');
    g.finish();
    await running;
    const r = slots.run('a', async (receiver) => {
      receiver.begin();
      await pause(40);
    });
    await pause(30);
    t.ok(slots.deferral('a') > 10, 'slow once the receiver itself takes long');
    await r;
  },
);

t.test('a client whose posts are quick is never handed back, however many wait', async (t) => {
  const slots = slotsOf(8, 2, { slowPostMs: 1_000, maxWaitMs: 10 });
  const g = gate();
  const running = [posting(slots, 'a', () => g.wait), posting(slots, 'a', () => g.wait)];
  const parked = Array.from({ length: 50 }, () => posting(slots, 'a', async () => {}));
  await pause(60);
  t.equal(slots.deferral('a'), 0, '60 ms posts are not slow');
  t.equal(slots.deferParked(), 0, 'none of the parked handed back');
  g.finish();
  await Promise.all([...running, ...parked]);
  t.pass('all 52 ran');
});

t.test(
  'deferParked hands back the parked posts that would wait too long, the nearest kept',
  async (t) => {
    const slots = slotsOf(8, 2, { slowPostMs: 20, maxWaitMs: 100 });
    const g = gate();
    const running = [posting(slots, 'a', () => g.wait), posting(slots, 'a', () => g.wait)];
    const ran: number[] = [];
    const parked = [1, 2, 3, 4, 5].map((n) => posting(slots, 'a', async () => void ran.push(n)));
    const outcomes = Promise.allSettled(parked);
    await pause(60);
    // Positions 0–1 are one round away (~60 ms), 2–3 two rounds, 4 three rounds.
    t.equal(slots.deferParked(), 3, 'the posts two and three rounds away');
    t.equal(slots.waiting, 2);
    g.finish();
    await Promise.all(running);
    const settled = await outcomes;
    t.same(ran, [1, 2], 'the nearest two still run');
    const delays = settled
      .slice(2)
      .map((s) =>
        s.status === 'rejected' && s.reason instanceof PostDeferred ? s.reason.delayMs : null,
      );
    t.ok(
      delays.every((d) => d !== null && d > 100),
      `each handed back with its expected wait (${delays.join(', ')} ms)`,
    );
    t.equal((settled[2] as PromiseRejectedResult).reason.code, 'ENS_ERR_POST_DEFERRED');
    t.ok(delays[2]! > delays[0]!, 'a later one with a longer wait');
    t.equal(slots.deferParked(), 0, 'nothing left to hand back');
  },
);

t.test(
  "startsSoon: by the wait behind the client's own share, however quick its posts; closed, never",
  async (t) => {
    const slots = slotsOf(8, 2, { maxWaitMs: 100 });
    t.ok(slots.startsSoon('a'), 'a client with no posts');
    const g = gate();
    const running = [1, 2].map(() => posting(slots, 'a', () => g.wait));
    await pause(5);
    t.ok(slots.startsSoon('a'), 'at its share with none parked, its posts not yet long');
    // Posts that have run for 60 ms so far, two at a time: a post behind two parked ones waits
    // about two rounds of them, more than 100 ms.
    const parked = [3, 4].map(() => posting(slots, 'a', () => g.wait));
    await pause(60);
    t.notOk(slots.startsSoon('a'), 'behind parked posts that would keep it past maxWaitMs');
    t.ok(slots.startsSoon('b'), 'another client is not held by them');
    t.equal(slots.waiting, 2, 'asking moved nothing');
    g.finish();
    await Promise.all([...running, ...parked]);
    slots.close();
    t.notOk(slots.startsSoon('b'), 'closed slots take nothing');
  },
);

t.test('sizes are checked', async (t) => {
  t.throws(() => slotsOf(0, 1), RangeError);
  t.throws(() => slotsOf(4, 0), RangeError);
  t.throws(() => slotsOf(4, 5), RangeError);
  t.throws(() => slotsOf(4, 1.5), RangeError);
  t.throws(() => slotsOf(4, 2, { maxWaitMs: -1 }), RangeError);
});
