import t from 'tap';
import { freePort } from '@ens/local-engines';
import { FakeTwilio } from '@ens/plugin-twilio/testing';
import { startReceiver } from '../harness/receiver.ts';
import {
  smsHandoff,
  startTestService,
  uniqueKey,
  waitFor,
  type TestClient,
  type TestService,
} from '../harness/service.ts';

/**
 * SMS consent end to end through the Twilio plugin pointed at the fake Twilio: a number Twilio
 * refuses (21610 opted out, 21211 invalid) is failed and suppressed, and a later send to it makes
 * no provider call; a signed STOP texted to a tenant's sender number suppresses the texter for the
 * tenants sending from that number only, and START lifts it. The entries carry their reason and
 * the provider's words.
 */

const NO_REPLY = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>';
const SHOP_SENDER = '+15005550009';
const DEFAULT_FROM = '+15005550006';

/** Message create requests the fake Twilio received for `to`. */
const callsTo = (twilio: FakeTwilio, to: string) =>
  twilio.received.filter(
    (r) => r.method === 'POST' && r.path.endsWith('/Messages.json') && r.form.To === to,
  ).length;

async function sendOne(
  svc: TestService,
  client: TestClient,
  tenant: string,
  to: string,
  callbackUrl: string,
): Promise<string> {
  const r = await svc.send(
    client,
    smsHandoff(tenant, [to], { callback_url: callbackUrl }),
    uniqueKey('consent'),
  );
  if (r.status !== 202) throw new Error(`send refused: ${r.status} ${r.text}`);
  return r.body.deliveries[0].delivery_id as string;
}

async function ended(
  svc: TestService,
  client: TestClient,
  id: string,
): Promise<{
  status: string;
  last_error: string | null;
  attempts: number;
  provider_message_id: string | null;
}> {
  return waitFor(
    async () => {
      const row = (await svc.feed(client)).find((d) => d.delivery_id === id);
      return row && row.status !== 'pending' ? row : undefined;
    },
    20_000,
    `delivery ${id} to end`,
  );
}

t.test('sms consent through the Twilio plugin: refusals, STOP and START', async (t) => {
  const twilio = new FakeTwilio();
  const twilioUrl = await twilio.start();
  t.teardown(() => twilio.stop());
  const port = await freePort();
  const ensUrl = `http://127.0.0.1:${port}`;
  const inboundUrl = `${ensUrl}/webhooks/twilio/inbound`;
  const svc = await startTestService(t, {
    env: {
      PORT: String(port),
      ENS_PROVIDERS: 'sms=@ens/plugin-twilio',
      ENS_PROVIDER_CONFIG: JSON.stringify({
        '@ens/plugin-twilio': {
          accountSid: twilio.accountSid,
          authToken: twilio.authToken,
          from: DEFAULT_FROM,
          baseUrl: twilioUrl,
          statusCallbackUrl: `${ensUrl}/webhooks/twilio/status`,
          inboundUrl,
        },
      }),
    },
  });
  const receiver = await startReceiver(t);
  const client = await svc.createClient({ callbackSecret: true });
  t.equal(
    (
      await client.call('POST', '/v2/tenants', {
        body: { tenant: 'shop', settings: { sender_id: SHOP_SENDER } },
      })
    ).status,
    201,
  );
  // A second tenant sending from the plugin's default number: a STOP to the shop's number is not
  // about it.
  await svc.tenant(client, 'other');
  const list = async (tenant: string, address: string) =>
    (await svc.rt.suppressions.list(client.clientId, tenant, { channel: 'sms', address })).results;

  t.test(
    'a number Twilio refuses is failed and suppressed; the next send to it makes no provider call',
    async (t) => {
      const cases = [
        { to: '+15550000001', code: 21610, reason: 'opt_out' }, // the fake's "unsubscribed recipient"
        { to: '+15550000000', code: 21211, reason: 'invalid_recipient' }, // the fake's "invalid To"
      ];
      for (const c of cases) {
        const first = await sendOne(svc, client, 'shop', c.to, receiver.url);
        const row = await ended(svc, client, first);
        t.match(
          row,
          { status: 'failed', last_error: new RegExp(`^twilio ${c.code}: `) },
          `${c.code}: failed with Twilio's words`,
        );
        t.equal(callsTo(twilio, c.to), 1, `${c.code}: one API call`);
        // The entry is committed before the delivery is failed: no wait.
        const [entry] = await list('shop', c.to);
        t.match(
          entry,
          {
            channel: 'sms',
            address: c.to,
            scope: '*',
            reason: c.reason,
            source: 'provider',
            provider: /twilio/,
            delivery_id: first,
            detail: new RegExp(`^twilio ${c.code}: `),
          },
          `${c.code}: suppressed as ${c.reason}, with the evidence`,
        );
        t.same(await list('other', c.to), [], `${c.code}: the other tenant's list is untouched`);

        const second = await sendOne(svc, client, 'shop', c.to, receiver.url);
        const again = await ended(svc, client, second);
        t.equal(again.status, 'failed', `${c.code}: the second send fails`);
        t.match(
          again.last_error,
          new RegExp(
            `^suppressed: \\${c.to} is on the suppression list \\(${c.reason}, provider\\)`,
          ),
          `${c.code}: last_error names the entry`,
        );
        t.equal(again.provider_message_id, null);
        t.equal(callsTo(twilio, c.to), 1, `${c.code}: the fake Twilio received no second call`);
        const posted = await waitFor(
          async () =>
            receiver.posts
              .map((p) => JSON.parse(p.raw.toString('utf8')))
              .find((b) => b.delivery_id === second),
          15_000,
          "the suppressed send's callback",
        );
        t.equal(posted.status, 'failed', `${c.code}: its failed callback is posted`);
      }
    },
  );

  t.test(
    "a signed STOP texted to the tenant's sender suppresses the texter there; START lifts it",
    async (t) => {
      const texter = '+15557651234';
      const before = await sendOne(svc, client, 'shop', texter, receiver.url);
      t.equal((await ended(svc, client, before)).status, 'sent', 'sent before the STOP');
      t.equal(callsTo(twilio, texter), 1);

      const forged = await twilio.sendInbound(
        inboundUrl,
        { from: texter, to: SHOP_SENDER, body: 'STOP' },
        { signWith: 'not-the-auth-token' },
      );
      t.equal(forged.status, 403, 'a forged STOP is refused');
      t.same(await list('shop', texter), [], 'and records nothing');

      const stop = await twilio.sendInbound(inboundUrl, {
        from: texter,
        to: SHOP_SENDER,
        body: 'Stop',
      });
      t.equal(stop.status, 200);
      t.equal(stop.body, NO_REPLY);
      const [entry] = await list('shop', texter);
      t.match(
        entry,
        {
          address: texter,
          scope: '*',
          reason: 'opt_out',
          source: 'provider',
          provider: /twilio/,
          delivery_id: null,
          detail: new RegExp(`^twilio inbound SM[0-9a-f]{32} to \\${SHOP_SENDER}: text "Stop"$`),
        },
        "an opt-out, committed before Twilio was answered, with the texter's words",
      );
      t.same(
        await list('other', texter),
        [],
        "the tenant sending from the default number is not bound by a STOP to the shop's",
      );

      const after = await sendOne(svc, client, 'shop', texter, receiver.url);
      const row = await ended(svc, client, after);
      t.equal(row.status, 'failed');
      t.match(
        row.last_error,
        /^suppressed: \+15557651234 is on the suppression list \(opt_out, provider\)/,
      );
      t.equal(callsTo(twilio, texter), 1, 'no provider call after the STOP');
      const other = await sendOne(svc, client, 'other', texter, receiver.url);
      t.equal(
        (await ended(svc, client, other)).status,
        'sent',
        'the other tenant still sends to the texter',
      );
      t.equal(callsTo(twilio, texter), 2);

      const start = await twilio.sendInbound(inboundUrl, {
        from: texter,
        to: SHOP_SENDER,
        body: 'START',
      });
      t.equal(start.status, 200);
      t.same(await list('shop', texter), [], 'START lifted the opt-out');
      const resumed = await sendOne(svc, client, 'shop', texter, receiver.url);
      t.equal((await ended(svc, client, resumed)).status, 'sent', 'sent again after START');
      t.equal(callsTo(twilio, texter), 3);
      t.match(
        twilio.received.filter((r) => r.path.endsWith('/Messages.json')).at(-1)?.form,
        { To: texter, From: SHOP_SENDER },
        "from the shop's own number",
      );
    },
  );

  t.test(
    'a STOP to the default number binds the tenants without a sender of their own',
    async (t) => {
      const texter = '+15557655678';
      const stop = await twilio.sendInbound(inboundUrl, {
        from: texter,
        to: DEFAULT_FROM,
        body: 'UNSUBSCRIBE',
      });
      t.equal(stop.status, 200);
      t.match(
        await list('other', texter),
        [{ reason: 'opt_out' }],
        'the tenant with no sender_id is bound',
      );
      t.same(await list('shop', texter), [], 'the tenant with its own number is not');
      const refused = await sendOne(svc, client, 'other', texter, receiver.url);
      t.match(await ended(svc, client, refused), { status: 'failed', last_error: /^suppressed: / });
      t.equal(callsTo(twilio, texter), 0, 'no provider call');
    },
  );
});
