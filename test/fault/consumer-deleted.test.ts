import t, { type Test } from 'tap';
import { jetstreamManager } from '@nats-io/jetstream';
import { BULK_WAKEUPS, SEND_STREAM, CALLBACK_STREAM, sendConsumer } from '@ens/core/internal';
import { startTestService, uniqueKey, waitFor, type TestService } from '../harness/service.ts';

/**
 * A consume loop whose consumer (or whole stream) disappears from the server under it must be
 * noticed and started again; until then /readyz names it and ens_consumer_up says 0. Before the
 * loops were supervised, deleting `worker-email` under a running worker stranded every email
 * delivery while sms went on.
 */
const ENV = { ENS_SWEEP_GRACE: '500ms', ENS_LEASE: '2s' };

async function sendEmail(t: Test, svc: TestService, n: number): Promise<void> {
  const client = await svc.createClient();
  await svc.tenant(client, 'stuck');
  const recipients = Array.from({ length: n }, (_, i) => `user${i}@example.com`);
  const r = await svc.send(
    client,
    {
      tenant: 'stuck',
      event_type: 'fault.consumer',
      messages: [
        { channel: 'email', recipients, content: { kind: 'rendered', subject: 's', body: 'b' } },
      ],
    },
    uniqueKey('stuck'),
  );
  t.equal(r.status, 202, 'accepted');
}

const pending = async (svc: TestService) =>
  Number(
    (
      await svc.rt.db.query<{ n: string }>(
        `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`,
      )
    ).rows[0]!.n,
  );

async function consumerUp(svc: TestService, consumer: string): Promise<string | undefined> {
  const r = await svc.request('GET', '/metrics');
  return r.text
    .split('\n')
    .find((l) => l.startsWith('ens_consumer_up{') && l.includes(`consumer="${consumer}"`))
    ?.split(' ')
    .pop();
}

// A handoff of up to BULK_WAKEUPS deliveries wakes the channel's first lane, a larger one its bulk
// lane.
for (const [lane, n] of [
  ['next', BULK_WAKEUPS],
  ['bulk', BULK_WAKEUPS * 2],
] as const) {
  t.test(`the email consumer of the ${lane} lane deleted under a running worker`, async (t) => {
    const svc = await startTestService(t, { env: ENV });
    const jsm = await jetstreamManager(svc.rt.nc);
    const name = sendConsumer('email', lane);
    t.equal(await consumerUp(svc, name), '1', 'the loop reports itself up');
    await jsm.consumers.delete(SEND_STREAM, name);
    await sendEmail(t, svc, n);
    await waitFor(async () => (await pending(svc)) === 0, 20_000, 'every email delivery to end');
    t.pass('every email delivery ended');
    t.equal(await consumerUp(svc, name), '1', 'the loop is up again');
    const ready = await svc.request('GET', '/readyz');
    t.equal(ready.status, 200, 'ready again');
  });
}

t.test('the send stream deleted under a running worker', async (t) => {
  const svc = await startTestService(t, { env: ENV });
  const jsm = await jetstreamManager(svc.rt.nc);
  await jsm.streams.delete(SEND_STREAM);
  await sendEmail(t, svc, 20);
  await waitFor(async () => (await pending(svc)) === 0, 20_000, 'every email delivery to end');
  t.pass('every email delivery ended');
  const info = await jsm.streams.info(SEND_STREAM);
  t.equal(info.config.name, SEND_STREAM, 'the stream was declared again');
});

t.test('a loop that is not consuming is named by /readyz and the metric', async (t) => {
  const svc = await startTestService(t, { env: { ...ENV } });
  const jsm = await jetstreamManager(svc.rt.nc);
  // Deleting the callbacks stream and holding it away (a stream of the same name that is not a
  // work queue refuses the consumer) keeps the loop down long enough to observe.
  await jsm.streams.delete(CALLBACK_STREAM);
  await jsm.streams
    .add({ name: CALLBACK_STREAM, subjects: ['ens.callbacks.blocked'], max_consumers: 0 } as never)
    .catch(() => {});
  const down = await waitFor(
    async () => {
      const r = await svc.request('GET', '/readyz');
      return r.status === 503 && JSON.stringify(r.body).includes('callbacks') ? r : undefined;
    },
    20_000,
    '/readyz to report the callbacks loop',
  );
  t.match(JSON.stringify(down.body), /callbacks/, '/readyz names the loop');
  t.equal(await consumerUp(svc, 'callbacks'), '0', 'ens_consumer_up is 0 for it');
});
