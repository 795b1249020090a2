import t from 'tap';
import { Coalescer } from '@ens/core/internal';

/** A batch function whose calls are recorded and finish only when the test says so. */
function controlledRun() {
  const calls: {
    inputs: number[];
    resolve: (out: string[]) => void;
    reject: (err: unknown) => void;
  }[] = [];
  const run = (inputs: number[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({ inputs, resolve, reject });
    });
  const answer = (i: number) => calls[i]!.resolve(calls[i]!.inputs.map((n) => `r${n}`));
  return { calls, run, answer };
}

const settle = () => new Promise((r) => setImmediate(r));

t.test('the first call when idle goes at once, on its own', async (t) => {
  const { calls, run, answer } = controlledRun();
  const c = new Coalescer(run, { maxBatch: 10 });
  const p = c.call(1);
  t.same(
    calls.map((x) => x.inputs),
    [[1]],
    'run was called before call() returned: no timer, no tick',
  );
  answer(0);
  t.equal(await p, 'r1');
});

t.test('calls that arrive while a batch is in flight go together as the next batch', async (t) => {
  const { calls, run, answer } = controlledRun();
  const c = new Coalescer(run, { maxBatch: 10 });
  const first = c.call(0);
  const rest = [1, 2, 3, 4, 5].map((n) => c.call(n));
  await settle();
  t.equal(calls.length, 1, 'nothing more runs while the first batch is in flight');
  t.equal(c.queued, 5);
  answer(0);
  t.equal(await first, 'r0');
  await settle();
  t.same(
    calls.map((x) => x.inputs),
    [[0], [1, 2, 3, 4, 5]],
    'the queued calls ran as one batch, in arrival order',
  );
  answer(1);
  t.same(
    await Promise.all(rest),
    ['r1', 'r2', 'r3', 'r4', 'r5'],
    'each caller gets its own result',
  );
});

t.test('a batch never exceeds maxBatch', async (t) => {
  const { calls, run, answer } = controlledRun();
  const c = new Coalescer(run, { maxBatch: 3 });
  const all = [0, 1, 2, 3, 4, 5, 6, 7].map((n) => c.call(n));
  for (let i = 0; i < 4; i++) {
    await settle();
    answer(i);
  }
  t.same(await Promise.all(all), ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7']);
  t.same(
    calls.map((x) => x.inputs),
    [[0], [1, 2, 3], [4, 5, 6], [7]],
  );
});

t.test('maxInFlight batches run at once; the rest queue behind them', async (t) => {
  const { calls, run, answer } = controlledRun();
  const c = new Coalescer(run, { maxBatch: 10, maxInFlight: 2 });
  const all = [0, 1, 2, 3].map((n) => c.call(n));
  t.same(
    calls.map((x) => x.inputs),
    [[0], [1]],
    'two calls went at once, each alone',
  );
  answer(1);
  await settle();
  t.same(
    calls.map((x) => x.inputs),
    [[0], [1], [2, 3]],
    'the freed slot took everything queued',
  );
  answer(0);
  answer(2);
  t.same(await Promise.all(all), ['r0', 'r1', 'r2', 'r3']);
});

t.test('an error in a batch reaches every caller of that batch, and only them', async (t) => {
  const { calls, run, answer } = controlledRun();
  const c = new Coalescer(run, { maxBatch: 10 });
  const first = c.call(0);
  const doomed = [1, 2, 3].map((n) => c.call(n));
  answer(0);
  await first;
  await settle();
  const later = c.call(4);
  const boom = new Error('connection lost');
  calls[1]!.reject(boom);
  const outcomes = await Promise.allSettled(doomed);
  t.same(
    outcomes.map((o) => o.status),
    ['rejected', 'rejected', 'rejected'],
  );
  t.ok(
    outcomes.every((o) => o.status === 'rejected' && o.reason === boom),
    'each caller gets the same error',
  );
  await settle();
  t.same(calls[2]!.inputs, [4], 'the coalescer keeps going after a failed batch');
  answer(2);
  t.equal(await later, 'r4');
});

t.test(
  'a batch that throws synchronously or answers the wrong count fails its callers',
  async (t) => {
    const sync = new Coalescer<number, number>(
      () => {
        throw new Error('bad input');
      },
      { maxBatch: 4 },
    );
    await t.rejects(sync.call(1), { message: 'bad input' });
    await t.rejects(sync.call(2), { message: 'bad input' }, 'and the next call runs again');

    const short = new Coalescer<number, number>(async (xs) => xs.slice(1), { maxBatch: 4 });
    await t.rejects(short.call(1), /returned 0 results for 1 inputs/);
  },
);

t.test('options are checked', async (t) => {
  t.throws(() => new Coalescer(async (xs: number[]) => xs, { maxBatch: 0 }), RangeError);
  t.throws(
    () => new Coalescer(async (xs: number[]) => xs, { maxBatch: 1, maxInFlight: 0 }),
    RangeError,
  );
  t.throws(
    () => new Coalescer(async (xs: number[]) => xs, { maxBatch: 1, maxWeight: 0 }),
    RangeError,
  );
});

t.test(
  'end-of-turn flush: calls made in one turn go together, a lone one still without delay',
  async (t) => {
    const { calls, run, answer } = controlledRun();
    const c = new Coalescer(run, { maxBatch: 10, flush: 'end-of-turn' });
    const all = [0, 1, 2].map((n) => c.call(n));
    t.equal(calls.length, 0, 'nothing runs before the turn ends');
    await settle();
    t.same(
      calls.map((x) => x.inputs),
      [[0, 1, 2]],
      'the calls of one turn are one batch',
    );
    const queuedBehind = c.call(3);
    await settle();
    t.equal(calls.length, 1, 'with the slot busy, a call waits for it');
    answer(0);
    t.same(await Promise.all(all), ['r0', 'r1', 'r2']);
    await settle();
    t.same(calls[1]!.inputs, [3], 'and goes as soon as it frees');
    answer(1);
    t.equal(await queuedBehind, 'r3');
  },
);

t.test('maxWeight caps a batch by weight; a heavier input goes alone', async (t) => {
  const { calls, run, answer } = controlledRun();
  const c = new Coalescer(run, { maxBatch: 10, weight: (n: number) => n, maxWeight: 10 });
  const first = c.call(1);
  const rest = [4, 5, 30, 2, 3].map((n) => c.call(n));
  for (let i = 0; i < 4; i++) {
    await settle();
    answer(i);
  }
  t.same(await Promise.all([first, ...rest]), ['r1', 'r4', 'r5', 'r30', 'r2', 'r3']);
  t.same(
    calls.map((x) => x.inputs),
    [[1], [4, 5], [30], [2, 3]],
  );
});

t.test('isolate: a batch that fails as a whole is retried input by input', async (t) => {
  const runs: number[][] = [];
  const c = new Coalescer<number, string>(
    async (xs) => {
      runs.push(xs);
      if (xs.includes(13)) throw Object.assign(new Error('refused'), { refused: true });
      return xs.map((x) => `r${x}`);
    },
    {
      maxBatch: 10,
      flush: 'end-of-turn',
      isolate: (e) => (e as { refused?: boolean }).refused === true,
    },
  );
  const out = await Promise.allSettled([12, 13, 14].map((n) => c.call(n)));
  t.same(
    out.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message)),
    ['r12', 'refused', 'r14'],
    'only the input at fault fails',
  );
  t.same(runs, [[12, 13, 14], [12], [13], [14]]);

  const lost = new Coalescer<number, string>(
    async () => {
      throw new Error('connection lost');
    },
    { maxBatch: 10, flush: 'end-of-turn', isolate: () => false },
  );
  const gone = await Promise.allSettled([1, 2].map((n) => lost.call(n)));
  t.ok(
    gone.every((o) => o.status === 'rejected'),
    'an error isolate does not claim fails the whole batch at once',
  );
});
