import t from 'tap';
import { startTestService, smsHandoff, waitFor } from '../harness/service.ts';

/**
 * Running out of retries: ENS_RETRY_BACKOFF has one entry, so a delivery gets one retry (two
 * attempts in all). A flaky sandbox recipient fails twice, so it runs out and ends failed.
 * (A separate file because the retry schedule is fixed per service.)
 */
const svc = await startTestService(t, { env: { ENS_RETRY_BACKOFF: '50ms' } });
const client = await svc.createClient();
await svc.tenant(client, 'acme');

t.test(
  'a delivery that runs out of retries ends failed with last_error saying it gave up',
  async (t) => {
    const r = await svc.send(client, smsHandoff('acme', ['+15552221111']));
    t.equal(r.status, 202);
    const id = r.body.deliveries[0].delivery_id;
    const row = await waitFor(
      async () =>
        (await svc.feed(client)).find((d) => d.delivery_id === id && d.status !== 'pending'),
      10_000,
      'the delivery to finish',
    );
    t.equal(row.status, 'failed');
    t.equal(row.attempts, 2, 'one first attempt and the one retry the schedule allows');
    t.match(row.last_error, /^sandbox:/, 'last_error carries the provider reason');
    t.match(row.last_error, /gave up after 2 attempts/, 'last_error says it gave up');
    t.equal(row.provider_message_id, null);
    const { rows } = await svc.rt.db.query<{ outcome: string }>(
      'SELECT outcome FROM attempts WHERE delivery_id = $1 ORDER BY number',
      [id],
    );
    t.same(
      rows.map((a) => a.outcome),
      ['transient', 'transient'],
      'both attempts are recorded as transient',
    );
  },
);

t.test('a recipient that succeeds first time is unaffected by a short schedule', async (t) => {
  const r = await svc.send(client, smsHandoff('acme', ['+15552223333']));
  const id = r.body.deliveries[0].delivery_id;
  const row = await waitFor(async () =>
    (await svc.feed(client)).find((d) => d.delivery_id === id && d.status !== 'pending'),
  );
  t.equal(row.status, 'sent');
  t.equal(row.attempts, 1);
});
