import t from 'tap';
import {
  FairQueue,
  FairSlots,
  parseCallbackWakeup,
  parseSendWakeup,
  type Flow,
} from '@ens/core/internal';

const flow = (client: string, tenant = 't', priority = false): Flow => ({
  client,
  tenant,
  priority,
});

/** Takes everything, in order. */
function drain<T>(q: FairQueue<T>): T[] {
  const out: T[] = [];
  for (let x = q.shift(); x !== undefined; x = q.shift()) out.push(x);
  return out;
}

t.test(
  'a client with one item waits for one turn of each client with a backlog, not for the backlog',
  async (t) => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 10_000; i++) q.push(flow('A'), `a${i}`);
    t.equal(q.shift(), 'a0');
    q.push(flow('B'), 'b0');
    t.same([q.shift(), q.shift()], ['a1', 'b0'], 'B goes after one more of A');
    t.equal(q.size, 9_998);
    t.equal(drain(q).length, 9_998, 'A keeps everything else, in order');
  },
);

t.test('backlogs share equally; weights share in proportion', async (t) => {
  const q = new FairQueue<string>({ client: (c) => (c === 'heavy' ? 3 : 1), tenant: () => 1 });
  for (const c of ['x', 'y', 'heavy']) for (let i = 0; i < 600; i++) q.push(flow(c), c);
  const first = drain(q).slice(0, 500);
  const share = (c: string) => first.filter((x) => x === c).length;
  t.equal(share('x'), 100);
  t.equal(share('y'), 100);
  t.equal(share('heavy'), 300, 'weight 3: three times the share');
});

t.test(
  "tenants share their client's turns; the client's share does not grow with its tenants",
  async (t) => {
    const q = new FairQueue<string>({
      client: () => 1,
      tenant: (_c, tn) => (tn === 'gold' ? 2 : 1),
    });
    for (let i = 0; i < 300; i++) {
      q.push(flow('A', 'gold'), 'A/gold');
      q.push(flow('A', 'plain'), 'A/plain');
      q.push(flow('A', 'other'), 'A/other');
      q.push(flow('B', 'only'), 'B/only');
    }
    const first = drain(q).slice(0, 400);
    const n = (k: string) => first.filter((x) => x === k).length;
    t.equal(n('B/only'), 200, 'B gets half however many tenants A has');
    t.equal(n('A/gold'), 100, 'within A, gold (weight 2) gets half');
    t.equal(n('A/plain'), 50);
    t.equal(n('A/other'), 50);
  },
);

t.test('the priority lane goes first within its client, not ahead of other clients', async (t) => {
  const q = new FairQueue<string>();
  for (let i = 0; i < 100; i++) q.push(flow('bank', 'retail'), `news${i}`);
  for (let i = 0; i < 100; i++) q.push(flow('shop'), `shop${i}`);
  q.push(flow('bank', 'retail', true), 'otp');
  const order = drain(q);
  t.equal(order.indexOf('otp'), 0, "the bank's one-time code before its newsletter");
  t.equal(order[1], 'shop0', 'and then the other client has its turn');
});

t.test('urgent items (retries) go to the front of their own flow only', async (t) => {
  const q = new FairQueue<string>();
  for (let i = 0; i < 5; i++) q.push(flow('A'), `a${i}`);
  for (let i = 0; i < 5; i++) q.push(flow('B'), `b${i}`);
  q.push(flow('A'), 'a-retry', true);
  t.same(drain(q).slice(0, 4), ['a-retry', 'b0', 'a0', 'b1']);
});

t.test('items() and backlog() see every waiting item', async (t) => {
  const q = new FairQueue<number>();
  q.push(flow('A', 'x'), 1);
  q.push(flow('A', 'y'), 2);
  q.push(flow('A', 'y', true), 3);
  q.push(flow('B', 'x'), 4);
  t.same([...q.items()].sort(), [1, 2, 3, 4]);
  t.same(
    q.backlog().sort((a, b) => `${a.client}${a.tenant}`.localeCompare(`${b.client}${b.tenant}`)),
    [
      { client: 'A', tenant: '*priority', waiting: 1 },
      { client: 'A', tenant: 'x', waiting: 1 },
      { client: 'A', tenant: 'y', waiting: 1 },
      { client: 'B', tenant: 'x', waiting: 1 },
    ],
  );
  drain(q);
  t.same(q.backlog(), [], 'nothing is kept for flows that emptied');
});

t.test(
  'FairSlots: freed slots go to waiting items in fair order; close cancels the waiting ones',
  async (t) => {
    const order: string[] = [];
    const cancelled: string[] = [];
    const releases = new Map<string, () => void>();
    const slots = new FairSlots<string>(1, {
      start: (item) =>
        new Promise<void>((resolve) => {
          order.push(item);
          releases.set(item, resolve);
        }),
      cancel: (item) => void cancelled.push(item),
    });
    const tick = () => new Promise((r) => setImmediate(r));
    slots.submit(flow('A'), 'hold');
    for (const i of [0, 1, 2]) slots.submit(flow('A'), `a${i}`);
    slots.submit(flow('B'), 'b0');
    await tick();
    t.same(order, ['hold'], 'one slot: one item under way');
    t.equal(slots.waiting, 4);
    for (const next of ['hold', 'a0', 'b0', 'a1']) {
      releases.get(next)!();
      await tick();
      await tick();
    }
    t.same(order, ['hold', 'a0', 'b0', 'a1', 'a2'], 'B goes after one of A, not after all of A');
    slots.submit(flow('C'), 'c0');
    slots.submit(flow('C'), 'c1');
    slots.close();
    t.same(cancelled, ['c0', 'c1'], 'waiting items are cancelled at close');
    slots.submit(flow('D'), 'late');
    t.same(cancelled, ['c0', 'c1', 'late'], 'and so are later ones');
    releases.get('a2')!();
    await tick();
    t.same(order, ['hold', 'a0', 'b0', 'a1', 'a2'], 'nothing starts after close');
  },
);

t.test('a send wake-up carries its flow; a bare delivery id still reads', async (t) => {
  t.same(
    parseSendWakeup('d1 ens_a shop order shipped today'),
    { id: 'd1', clientId: 'ens_a', tenant: 'shop', eventType: 'order shipped today' },
    'the event type may hold spaces',
  );
  t.same(
    parseSendWakeup('d1'),
    { id: 'd1', clientId: '', tenant: '', eventType: '' },
    'a wake-up published before flows',
  );
  t.same(parseSendWakeup('d1 ens_a shop'), {
    id: 'd1',
    clientId: 'ens_a',
    tenant: 'shop',
    eventType: '',
  });
});

t.test('a callback wake-up carries its client; a bare callback id still reads', async (t) => {
  t.same(parseCallbackWakeup('c1 ens_a'), { id: 'c1', clientId: 'ens_a' });
  t.same(
    parseCallbackWakeup('c1'),
    { id: 'c1', clientId: '' },
    'a wake-up published before callbacks had turns',
  );
});
