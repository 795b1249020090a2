import t from 'tap';
import { FakeSmsc } from '@ens/plugin-smpp/testing';
import { FakeTwilio } from '@ens/plugin-twilio/testing';
import { startTestService, smsHandoff, waitFor } from '../harness/service.ts';

/**
 * ENS_PROVIDERS=sms=@ens/plugin-twilio|@ens/plugin-smpp: while Twilio answers 503, SMS fails over
 * to the SMPP operator link; every message is still sent; Twilio gets its traffic back once a trial
 * send succeeds. SMPP delivery receipts reach the delivery like any webhook.
 */
t.test('sms fails over from Twilio to SMPP and back', async (t) => {
  const twilio = new FakeTwilio();
  const twilioUrl = await twilio.start();
  t.teardown(() => twilio.stop());
  const smsc = new FakeSmsc({ systemId: 'ens', password: 'smpp-pw' });
  const { host, port } = await smsc.start();
  t.teardown(() => smsc.stop());

  const svc = await startTestService(t, {
    env: {
      ENS_PROVIDERS: 'sms=@ens/plugin-twilio|@ens/plugin-smpp',
      ENS_PROVIDER_CONFIG: JSON.stringify({
        '@ens/plugin-twilio': {
          accountSid: twilio.accountSid,
          authToken: twilio.authToken,
          from: '+15005550006',
          baseUrl: twilioUrl,
        },
        '@ens/plugin-smpp': {
          host,
          port,
          systemId: 'ens',
          password: 'smpp-pw',
          sourceAddr: 'ENS',
          reconnectMinMs: 50,
          reconnectMaxMs: 200,
        },
      }),
      ENS_FAILOVER_THRESHOLD: '3',
      ENS_FAILOVER_COOLDOWN: '1s',
      ENS_RETRY_BACKOFF: '200ms,200ms,200ms,200ms,200ms',
    },
  });
  const client = await svc.createClient();
  await svc.tenant(client, 'shop');
  await waitFor(async () => smsc.binds.length > 0, 5_000, 'the SMPP bind');
  const attempts = async (ids: string[]) =>
    (
      await svc.rt.db.query<{ delivery_id: string; provider: string; outcome: string }>(
        'SELECT delivery_id, provider, outcome FROM attempts WHERE delivery_id = ' +
          'ANY($1::uuid[]) ORDER BY delivery_id, number',
        [ids],
      )
    ).rows;
  const sendAll = async (recipients: string[]) => {
    const r = await svc.send(client, smsHandoff('shop', recipients));
    t.equal(r.status, 202, r.text);
    return waitFor(
      async () => {
        const rows = (await svc.feed(client)).filter((d) => recipients.includes(d.recipient));
        return rows.length === recipients.length && rows.every((d) => d.status === 'sent')
          ? rows
          : undefined;
      },
      20_000,
      `${recipients.length} deliveries sent`,
    );
  };

  // Twilio is down: every message still goes out, the later ones straight through SMPP.
  twilio.knobs.serverError = 503;
  const during = Array.from({ length: 10 }, (_, i) => `+1555700${String(i).padStart(4, '5')}`);
  const sentDuring = await sendAll(during);
  const tried = await attempts(sentDuring.map((d) => d.delivery_id));
  t.ok(
    tried.some((a) => a.provider === 'twilio' && a.outcome === 'transient'),
    'Twilio was tried and failed transiently',
  );
  t.ok(
    tried.filter((a) => a.outcome === 'sent').every((a) => a.provider === 'smpp'),
    'every send that succeeded went through SMPP',
  );
  t.equal(
    smsc.submits.filter((s) => during.includes(`+${s.destinationAddr}`)).length,
    10,
    'the SMSC got all ten',
  );
  t.ok(
    tried.filter((a) => a.provider === 'twilio').length < 10 * 2,
    'once out, Twilio stopped getting every attempt',
  );

  // The SMSC's receipts reach the delivery like a webhook would: DELIVRD is recorded (the spec
  // fills delivered_at for whatsapp only), UNDELIV fails the delivery with the SMSC's reason.
  const [delivered, undelivered] = sentDuring as [
    { delivery_id: string; provider_message_id: string },
    { delivery_id: string; provider_message_id: string },
  ];
  await smsc.sendReceipt(delivered.provider_message_id, { stat: 'DELIVRD' });
  await smsc.sendReceipt(undelivered.provider_message_id, { stat: 'UNDELIV', err: '001' });
  await waitFor(
    async () => {
      const r = await svc.rt.db.query('SELECT kind FROM delivery_events WHERE delivery_id = $1', [
        delivered.delivery_id,
      ]);
      return r.rows.length > 0 && r.rows.every((e) => e.kind === 'delivered');
    },
    10_000,
    'the DELIVRD receipt recorded',
  );
  const failed = await waitFor(
    async () =>
      (await svc.feed(client)).find(
        (d) => d.delivery_id === undelivered.delivery_id && d.status === 'failed',
      ),
    10_000,
    'the UNDELIV receipt',
  );
  t.match(failed.last_error, /^smpp: UNDELIV/, "the SMSC's reason is last_error");

  // Twilio recovers: after the cool-down one trial send goes to it (sends racing the trial still
  // take SMPP); its success brings Twilio back for all traffic.
  twilio.knobs.serverError = null;
  await new Promise((r) => setTimeout(r, 1_200));
  const [trial] = await sendAll(['+15558009999']);
  t.same(
    (await attempts([trial!.delivery_id])).map((a) => `${a.provider}:${a.outcome}`),
    ['twilio:sent'],
    'the trial send went to Twilio',
  );
  const after = Array.from({ length: 5 }, (_, i) => `+1555800${String(i).padStart(4, '5')}`);
  const sentAfter = await sendAll(after);
  const back = await attempts(sentAfter.map((d) => d.delivery_id));
  t.same(
    back.map((a) => `${a.provider}:${a.outcome}`),
    Array(5).fill('twilio:sent'),
    'every send after recovery went through Twilio, first time',
  );
  t.equal([...twilio.messages.values()].filter((m) => after.includes(m.to)).length, 5);
});
