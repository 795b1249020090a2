import t from 'tap';
import { smsHandoff, startTestService, waitFor, type TestService } from '../harness/service.ts';

/**
 * A deployment whose workers (or callback posters) are all gone is seen from any process that is
 * left: ens_backlog_age_seconds grows for the channel whose work waits, and stays 0 elsewhere.
 */

async function age(svc: TestService, kind: string, channel: string): Promise<number> {
  const text = (await svc.request('GET', '/metrics')).text;
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`ens_backlog_age_seconds{kind="${kind}",channel="${channel}"}`));
  return line ? Number(line.split(' ').pop()) : NaN;
}

t.test('no worker: the sms backlog ages, other channels stay 0', async (t) => {
  const svc = await startTestService(t, { roles: ['api'] });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  t.equal(await age(svc, 'delivery', 'sms'), 0, 'nothing waits yet');
  t.equal((await svc.send(client, smsHandoff('acme', ['+15551230001']))).status, 202);
  const seen = await waitFor(
    async () => {
      const a = await age(svc, 'delivery', 'sms');
      return a >= 2 ? a : undefined;
    },
    15_000,
    'the sms backlog to age past 2 s',
  );
  t.ok(seen >= 2, `the sms backlog is ${seen} s old`);
  t.equal(await age(svc, 'delivery', 'email'), 0, 'email has no backlog');
  t.equal(await age(svc, 'callback', 'sms'), 0, 'no callback waits: the delivery has not ended');
});

t.test('no callbacks role: the callback backlog ages once the delivery ended', async (t) => {
  const svc = await startTestService(t, { roles: ['api', 'worker', 'feed'] });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  t.equal(
    (
      await svc.send(
        client,
        smsHandoff('acme', ['+15551230002'], { callback_url: 'http://127.0.0.1:9/cb' }),
      )
    ).status,
    202,
  );
  const seen = await waitFor(
    async () => {
      const a = await age(svc, 'callback', 'sms');
      return a >= 2 ? a : undefined;
    },
    15_000,
    'the callback backlog to age past 2 s',
  );
  t.ok(seen >= 2, `the oldest callback waits ${seen} s`);
  t.equal(await age(svc, 'delivery', 'sms'), 0, 'the delivery itself was sent');
});
