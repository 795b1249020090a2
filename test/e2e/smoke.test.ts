import t from 'tap';
import { startTestService, smsHandoff, waitFor } from '../harness/service.ts';

t.test('a handoff is accepted, sent and visible in the feed', async (t) => {
  const svc = await startTestService(t);
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const r = await svc.send(client, smsHandoff('acme', ['+15551230001']));
  t.equal(r.status, 202);
  t.equal(r.body.status, 'pending');
  const id = r.body.deliveries[0].delivery_id;
  const row = await waitFor(async () =>
    (await svc.feed(client)).find((d) => d.delivery_id === id && d.status === 'sent'),
  );
  t.equal(row.attempts, 1);
  t.match(row.provider_message_id, /^sandbox-/);
});
