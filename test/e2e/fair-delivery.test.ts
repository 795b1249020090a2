import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { SchedulingStore } from '@ens/core';
import { startRoles, type RunningRoles } from '@ens/app/roles';
import {
  sandboxPhones,
  smsHandoff,
  startTestService,
  uniqueKey,
  type TestClient,
} from '../harness/service.ts';

/**
 * Fair delivery, as a correctness check (the timed figures are in `npm run bench`). The sandbox
 * takes 5 ms per send and each worker has 4 send slots, so a backlog of a few thousand lasts
 * seconds; what is checked is the order of the sends, never their speed. Found by running ENS: a
 * client's single sms waited behind another client's whole blast, as the channel's queue was first
 * in, first out across every client.
 */

const svc = await startTestService(t, {
  roles: ['api', 'callbacks', 'feed'],
  env: {
    ENS_WORKER_CONCURRENCY: '4',
    ENS_PROVIDER_CONFIG: JSON.stringify({
      '@ens/plugin-sandbox': { handsetDelayMs: 50, sendDelayMs: 5 },
    }),
  },
});
const scheduling = new SchedulingStore(svc.rt.db);

let worker: RunningRoles | null = null;
async function startWorker(): Promise<void> {
  worker = await startRoles(svc.rt, ['worker'], { port: 0, host: '127.0.0.1' });
}
async function stopWorker(): Promise<void> {
  await worker?.stop();
  worker = null;
}
t.teardown(stopWorker);

async function clientWith(name: string, tenants: string[]): Promise<TestClient> {
  const c = await svc.createClient({ name });
  for (const tn of tenants) await svc.tenant(c, tn);
  return c;
}

async function send(
  c: TestClient,
  tenant: string,
  recipients: string[],
  eventType = 'test.event',
): Promise<string[]> {
  const r = await svc.send(
    c,
    smsHandoff(tenant, recipients, { event_type: eventType }),
    uniqueKey(),
  );
  if (r.status !== 202) throw new Error(`${r.status} ${r.text}`);
  return (r.body.deliveries as { delivery_id: string }[]).map((d) => d.delivery_id);
}

/** Waits until none of the client's deliveries is pending. */
async function drained(clientIds: string[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await svc.rt.db.query(
      `SELECT count(*)::int AS n FROM deliveries WHERE client_id = ANY ($1) AND status = 'pending'`,
      [clientIds],
    );
    if (rows[0].n === 0) return;
    if (Date.now() > deadline) throw new Error(`${rows[0].n} deliveries still pending`);
    await sleep(100);
  }
}

/**
 * The clients' sends in the order they happened (ties in sent_at broken by the attempt's start).
 */
async function sendOrder(
  clientIds: string[],
): Promise<{ id: string; client: string; tenant: string; event: string }[]> {
  const { rows } = await svc.rt.db.query(
    `SELECT d.id, d.client_id AS client, d.tenant, d.event_type AS event FROM deliveries d JOIN attempts a ON a.delivery_id = d.id AND a.number = d.attempts
      WHERE d.client_id = ANY ($1) AND d.status = 'sent' ORDER BY a.started_at, d.sent_at`,
    [clientIds],
  );
  return rows;
}

t.test("a single sms is not held behind another client's blast", async (t) => {
  const marketing = await clientWith('marketing', ['marketing']);
  const bank = await clientWith('bank', ['bank']);
  await startWorker();
  for (let i = 0; i < 2; i++) await send(marketing, 'marketing', sandboxPhones(1_000, i * 2_000));
  await sleep(300);
  const sentBefore = async (at?: string) =>
    (
      await svc.rt.db.query(
        `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'sent' ${at ? 'AND sent_at < $2' : ''}`,
        at ? [marketing.clientId, at] : [marketing.clientId],
      )
    ).rows[0].n as number;
  const atAccept = await sentBefore();
  t.ok(atAccept < 1_500, `the blast is under way, not over (${atAccept} of 2,000 sent)`);
  const [code] = await send(bank, 'bank', ['+15559990001'], 'auth.code');
  await drained([bank.clientId], 30_000);
  const { rows } = await svc.rt.db.query('SELECT sent_at FROM deliveries WHERE id = $1', [code]);
  const overtaken = (await sentBefore(rows[0].sent_at)) - atAccept;
  t.ok(
    overtaken < 100,
    `the code went out after ${overtaken} more of the blast's sends (first in, first out: about ${2_000 - atAccept})`,
  );
  await drained([marketing.clientId]);
  await stopWorker();
});

t.test(
  'backlogs share the send slots by weight, across clients and across tenants within a client',
  async (t) => {
    const x = await clientWith('x', ['x1']);
    const y = await clientWith('y', ['y1', 'y2']);
    const z = await clientWith('z', ['z1']);
    await scheduling.setClient(z.clientId, { weight: 2 });
    await scheduling.setTenant(y.clientId, 'y2', 3);
    // Queued while no worker runs, so every backlog is there when sending starts.
    await send(x, 'x1', sandboxPhones(600, 0));
    await send(y, 'y1', sandboxPhones(300, 1_000));
    await send(y, 'y2', sandboxPhones(900, 2_000));
    await send(z, 'z1', sandboxPhones(1_200, 4_000));
    await startWorker();
    const ids = [x.clientId, y.clientId, z.clientId];
    await drained(ids);
    await stopWorker();
    const order = await sendOrder(ids);
    t.equal(order.length, 3_000, 'every delivery was sent once');
    // While every client has work: up to the first send after which one client has none left.
    const total = { [x.clientId]: 600, [y.clientId]: 1_200, [z.clientId]: 1_200 };
    const seen: Record<string, number> = {};
    let end = order.length;
    for (const [i, s] of order.entries()) {
      seen[s.client] = (seen[s.client] ?? 0) + 1;
      if (seen[s.client] === total[s.client]) {
        end = i + 1;
        break;
      }
    }
    // Until the worker has pulled a wake-up of every client, it can only choose among those it
    // has: the first sends follow the stream's order (x's backlog was queued first). Measured in
    // a full local run: y's first send was the 45th, z's the 129th, and x had 104 of the first
    // 200. That start is bounded by the pull, and the shares are measured from its end.
    const firstOf = (c: string) => order.findIndex((s) => s.client === c);
    const start = Math.max(...ids.map(firstOf));
    t.ok(start < 400, `every client had a send within the first ${start + 1} sends`);
    const window = order.slice(start, end);
    const share = (pick: (s: (typeof order)[number]) => boolean) =>
      window.filter(pick).length / window.length;
    const near = (got: number, want: number, what: string) =>
      t.ok(
        Math.abs(got - want) <= want * 0.1,
        `${what}: ${(got * 100).toFixed(1)} % of the sends (fair share ${(want * 100).toFixed(1)} %)`,
      );
    t.ok(window.length >= 1_000, `${window.length} sends while all three had work`);
    near(
      share((s) => s.client === x.clientId),
      1 / 4,
      'client x (weight 1)',
    );
    near(
      share((s) => s.client === y.clientId),
      1 / 4,
      'client y (weight 1)',
    );
    near(
      share((s) => s.client === z.clientId),
      2 / 4,
      'client z (weight 2)',
    );
    const yWindow = window.filter((s) => s.client === y.clientId);
    const y2 = yWindow.filter((s) => s.tenant === 'y2').length / yWindow.length;
    t.ok(
      Math.abs(y2 - 0.75) <= 0.075,
      `within y, tenant y2 (weight 3) got ${(y2 * 100).toFixed(1)} % (fair share 75 %) while y1 had work`,
    );
  },
);

t.test("a client's priority event types go ahead of its own backlog", async (t) => {
  const bank = await clientWith('bank-priority', ['retail']);
  await scheduling.setClient(bank.clientId, { priorityEventTypes: ['otp.*'] });
  await send(bank, 'retail', sandboxPhones(800, 0), 'newsletter.weekly');
  const [otp] = await send(bank, 'retail', ['+15558880001'], 'otp.login');
  await startWorker();
  await drained([bank.clientId]);
  await stopWorker();
  const order = await sendOrder([bank.clientId]);
  const at = order.findIndex((s) => s.id === otp);
  // The first sends start while the worker is still reading the queue up to the code's wake-up.
  t.ok(
    at >= 0 && at < 80,
    `the one-time code, queued after 800 newsletters, was send number ${at + 1} of ${order.length}`,
  );
});
