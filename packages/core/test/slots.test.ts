import t from 'tap';
import { Slots } from '@ens/core/internal';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('at most size holders at once; waiters go in arrival order, also after a throw', async (t) => {
  const slots = new Slots(2);
  let holding = 0;
  let most = 0;
  const order: number[] = [];
  const job = (n: number, fail = false) =>
    slots.run(async () => {
      holding++;
      most = Math.max(most, holding);
      await pause(5);
      order.push(n);
      holding--;
      if (fail) throw new Error(`job ${n} failed`);
      return n;
    });
  const results = await Promise.allSettled([job(0), job(1, true), job(2), job(3), job(4)]);
  t.equal(most, 2);
  t.same(order, [0, 1, 2, 3, 4]);
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
  t.equal(await slots.run(async () => 'free again'), 'free again', 'every slot came back');
  t.throws(() => new Slots(0), RangeError);
});

t.test('close lets holders finish and turns waiters and later callers away', async (t) => {
  const slots = new Slots(1);
  let ran = 0;
  const holder = slots.run(async () => {
    await pause(10);
    return 'held';
  });
  const waiter = t.rejects(slots.run(async () => void ran++), { code: 'ENS_ERR_SLOTS_CLOSED' }, 'a waiter is turned away');
  slots.close();
  t.equal(await holder, 'held', 'the holder finishes');
  await waiter;
  await t.rejects(slots.run(async () => void ran++), { code: 'ENS_ERR_SLOTS_CLOSED' }, 'so is a later caller');
  t.equal(ran, 0, 'no function ran after close');
});
