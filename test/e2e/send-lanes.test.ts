import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstreamManager } from '@nats-io/jetstream';
import { BULK_WAKEUPS, SEND_STREAM, sendConsumer } from '@ens/core/internal';
import { startRoles, type RunningRoles } from '@ens/app/roles';
import {
  sandboxPhones,
  smsHandoff,
  startTestService,
  uniqueKey,
  waitFor,
  type TestClient,
} from '../harness/service.ts';

/**
 * The two lanes of a channel's work queue. Found by running ENS (`npm run bench`, fairness): a
 * single sms sent while another client's 50,000 were being accepted waited up to a second, because
 * its wake-up sat behind theirs in the channel's queue until the worker had read them all into its
 * fair window. Here the window is held small (16), so a worker reads a blast slowly and the wait
 * behind it is long enough to see: with one lane, the code went out after nearly all the blast.
 */

const svc = await startTestService(t, {
  roles: ['api', 'callbacks', 'feed'],
  env: {
    ENS_WORKER_CONCURRENCY: '4',
    ENS_SEND_WINDOW: '16',
    ENS_PROVIDER_CONFIG: JSON.stringify({
      '@ens/plugin-sandbox': { handsetDelayMs: 50, sendDelayMs: 5 },
    }),
  },
});

let worker: RunningRoles | null = null;
t.teardown(() => worker?.stop());

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

async function pendingOf(clientId: string): Promise<number> {
  return (
    await svc.rt.db.query(
      `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'pending'`,
      [clientId],
    )
  ).rows[0].n;
}

async function drained(clientId: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    async () => (await pendingOf(clientId)) === 0,
    timeoutMs,
    `no delivery of ${clientId} pending`,
  );
}

/** Wake-ups waiting on each lane of the sms queue, not yet handed to a worker. */
async function waiting(): Promise<{ next: number; bulk: number }> {
  const jsm = await jetstreamManager(svc.rt.nc);
  const [next, bulk] = await Promise.all([
    jsm.consumers.info(SEND_STREAM, sendConsumer('sms')),
    jsm.consumers.info(SEND_STREAM, sendConsumer('sms', 'bulk')),
  ]);
  return { next: next.num_pending, bulk: bulk.num_pending };
}

t.test(
  'a large handoff waits on the bulk lane; a message to one person does not wait behind it',
  async (t) => {
    const marketing = await svc.createClient({ name: 'marketing' });
    const bank = await svc.createClient({ name: 'bank' });
    await svc.tenant(marketing, 'marketing');
    await svc.tenant(bank, 'bank');

    // No worker yet: what each handoff published stays on the server, so its lane can be read.
    await send(marketing, 'marketing', sandboxPhones(1_000, 0));
    await send(bank, 'bank', sandboxPhones(BULK_WAKEUPS, 500_000));
    t.same(
      await waiting(),
      { next: BULK_WAKEUPS, bulk: 1_000 },
      `${BULK_WAKEUPS} wake-ups published together stay on the lane read at once; a fan-out goes to the bulk lane`,
    );

    worker = await startRoles(svc.rt, ['worker'], { port: 0, host: '127.0.0.1' });
    await drained(bank.clientId, 30_000);
    // The blast: 2,000 more, published while the worker holds 16 wake-ups at a time.
    for (let i = 0; i < 2; i++)
      await send(marketing, 'marketing', sandboxPhones(1_000, 10_000 + i * 2_000));
    await sleep(300);
    const sentBlast = async (before?: string) =>
      (
        await svc.rt.db.query(
          `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'sent' ${before ? 'AND sent_at < $2' : ''}`,
          before ? [marketing.clientId, before] : [marketing.clientId],
        )
      ).rows[0].n as number;
    const atSend = await sentBlast();
    const left = 3_000 - atSend;
    t.ok(left > 1_000, `the blast is under way, not over (${left} of 3,000 not sent yet)`);
    const [code] = await send(bank, 'bank', ['+15559990001'], 'auth.code');
    await drained(bank.clientId, 30_000);
    const { rows } = await svc.rt.db.query('SELECT sent_at FROM deliveries WHERE id = $1', [code]);
    const overtaken = (await sentBlast(rows[0].sent_at)) - atSend;
    t.ok(
      overtaken < 100,
      `the code went out after ${overtaken} more of the blast's sends (behind it in one queue: about ${left})`,
    );
    await drained(marketing.clientId);
    t.same(await waiting(), { next: 0, bulk: 0 }, 'both lanes were read to the end');
  },
);
