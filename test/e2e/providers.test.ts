import { createServer } from 'node:net';
import t from 'tap';
import { loadDelivery } from '@ens/core/internal';
import webpush from 'web-push';
import { fakeDeviceToken, startFakeApns } from '@ens/plugin-apns/testing';
import { FakeFcm, deviceToken } from '@ens/plugin-fcm/testing';
import { startSmtpTestServer, TEST_CA_PEM } from '@ens/plugin-smtp/testing';
import { FakeTwilio } from '@ens/plugin-twilio/testing';
import { startFakePushService } from '@ens/plugin-webpush/testing';
import { FakeGraph, FAKE_DEFAULTS } from '@ens/plugin-whatsapp/testing';
import { verifyEnsSignature } from '@ens/service-callbacks';
import { startReceiver } from '../harness/receiver.ts';
import { startS3Server, useS3Credentials } from '../harness/s3-server.ts';
import { startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/**
 * One handoff across all four channels, through the bundled provider plugins pointed at local
 * servers that speak each provider's wire protocol (and a real SMTP server process), with inline
 * images kept in an S3-compatible bucket: every delivery is sent, every callback arrives, and the
 * providers' webhooks update the record.
 */

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
}

t.test('one handoff, four channels, real provider plugins', async (t) => {
  const twilio = new FakeTwilio();
  const twilioUrl = await twilio.start();
  t.teardown(() => twilio.stop());
  const smtp = await startSmtpTestServer({ users: { ens: 'relay-password' } });
  t.teardown(() => smtp.stop());
  const smtpAddr = { host: smtp.host, port: smtp.port };
  const fcm = new FakeFcm();
  const fcmUrl = await fcm.start();
  t.teardown(() => fcm.stop());
  const graph = new FakeGraph();
  const graphUrl = await graph.start();
  t.teardown(() => graph.stop());
  const vapid = webpush.generateVAPIDKeys();
  const { fake: pushService } = await startFakePushService();
  t.teardown(() => pushService.stop());
  const apns = await startFakeApns({ topics: ['com.shop.app'] });
  t.teardown(() => apns.fake.stop());
  const s3 = await startS3Server(t, { bucket: 'ens-inline-images' });

  // The S3 store takes its credentials from the AWS SDK's default chain, as in production.
  useS3Credentials(t, s3);

  const port = await freePort();
  const ensUrl = `http://127.0.0.1:${port}`;
  const providerConfig = {
    '@ens/plugin-twilio': {
      accountSid: twilio.accountSid,
      authToken: twilio.authToken,
      from: '+15005550006',
      baseUrl: twilioUrl,
      statusCallbackUrl: `${ensUrl}/webhooks/twilio/status`,
    },
    '@ens/plugin-smtp': {
      host: smtpAddr.host,
      port: smtpAddr.port,
      auth: { user: 'ens', pass: 'relay-password' },
      tls: { ca: TEST_CA_PEM },
      fromAddress: 'noreply@ens.example',
      fromName: 'ENS',
    },
    '@ens/plugin-fcm': {
      serviceAccount: fcm.serviceAccount({ projectId: 'ens-e2e' }),
      baseUrl: fcmUrl,
    },
    '@ens/plugin-apns': apns.config,
    '@ens/plugin-webpush': {
      vapidSubject: 'mailto:ops@ens.example',
      vapidPublicKey: vapid.publicKey,
      vapidPrivateKey: vapid.privateKey,
      allowHttpEndpoints: true,
    },
    '@ens/plugin-whatsapp': {
      accessToken: FAKE_DEFAULTS.accessToken,
      phoneNumberId: FAKE_DEFAULTS.phoneNumberId,
      appSecret: FAKE_DEFAULTS.appSecret,
      verifyToken: 'e2e-verify-token',
      graphUrl,
    },
  };
  const svc = await startTestService(t, {
    env: {
      PORT: String(port),
      ENS_PROVIDERS:
        'sms=@ens/plugin-twilio,email=@ens/plugin-smtp,push=@ens/plugin-fcm|@ens/plugin-apns|@ens/plugin-webpush,whatsapp=@ens/plugin-whatsapp',
      ENS_PROVIDER_CONFIG: JSON.stringify(providerConfig),
      ENS_MEDIA_STORE: 's3',
      ENS_S3_BUCKET: s3.bucket,
      ENS_S3_ENDPOINT: s3.endpoint,
      ENS_S3_FORCE_PATH_STYLE: 'true',
    },
  });
  const receiver = await startReceiver(t);
  const client = await svc.createClient({ callbackSecret: true });
  const created = await client.call('POST', '/v2/tenants', {
    body: {
      tenant: 'shop',
      settings: { sender_id: 'SHOP', from_address: 'orders@shop.example', from_name: 'The Shop' },
    },
  });
  t.equal(created.status, 201, created.text);

  // The push recipient's devices: an Android phone (FCM), an iPhone (APNs), a browser, and an FCM
  // token that is dead.
  const phone = deviceToken();
  const dead = deviceToken('unregistered');
  const browser = pushService.subscribe(vapid.publicKey);
  const iphone = fakeDeviceToken('ok', 7);
  for (const [token, body] of [
    [phone, undefined],
    [dead, undefined],
    [iphone, { platform: 'apns' }],
    ['laptop', { platform: 'webpush', subscription: browser.json }],
  ] as const) {
    const r = await client.call(
      'PUT',
      `/v2/tenants/shop/users/user-42/devices/${encodeURIComponent(token)}`,
      body ? { body } : {},
    );
    t.equal(r.status, 201, `device ${token.slice(0, 12)} registered: ${r.text}`);
  }

  const handoff = {
    tenant: 'shop',
    event_type: 'order.shipped',
    reference: 'order-1001',
    callback_url: receiver.url,
    messages: [
      {
        channel: 'sms',
        recipients: ['+15551234567', '+15551234568'],
        content: { kind: 'rendered', body: 'Your order 1001 has shipped.' },
      },
      {
        channel: 'email',
        recipients: ['ada@example.com'],
        content: {
          kind: 'rendered',
          subject: 'Order 1001 shipped',
          body: 'Your order has shipped.',
          html: '<p>Your order has shipped.</p><img src="cid:logo">',
          inline_images: [{ cid: 'logo', media_type: 'image/png', data: PNG.toString('base64') }],
        },
      },
      {
        channel: 'push',
        recipients: ['user-42'],
        content: {
          kind: 'rendered',
          subject: 'Shipped',
          body: 'Order 1001 is on its way',
          data: { order: '1001' },
        },
      },
      {
        channel: 'whatsapp',
        recipients: ['+15551230003', '+15551230004'],
        content: {
          kind: 'template',
          template_name: FAKE_DEFAULTS.templates[0]!.name,
          language: FAKE_DEFAULTS.templates[0]!.languages[0],
          body_params: Array.from(
            { length: FAKE_DEFAULTS.templates[0]!.bodyParams },
            (_, i) => `p${i + 1}`,
          ),
        },
      },
    ],
  };
  const accepted = await svc.send(client, handoff, uniqueKey('e2e'));
  t.equal(accepted.status, 202, accepted.text);

  const rows = await waitFor(
    async () => {
      const r = await svc.feed(client);
      return r.length === 6 && r.every((d) => d.status === 'sent') ? r : undefined;
    },
    20_000,
    'all six deliveries sent',
  );
  const by = (channel: string, recipient: string) =>
    rows.find((d) => d.channel === channel && d.recipient === recipient)!;

  // Each provider received what its API expects.
  {
    const sms = [...twilio.messages.values()];
    t.same(sms.map((m) => m.to).sort(), ['+15551234567', '+15551234568']);
    t.ok(
      sms.every((m) => m.from === 'SHOP'),
      "the tenant's sender_id is the From",
    );
    t.ok(sms.every((m) => m.statusCallback === `${ensUrl}/webhooks/twilio/status`));
    t.equal(
      by('sms', '+15551234567').provider_message_id,
      sms.find((m) => m.to === '+15551234567')!.sid,
      'the Message SID is the provider_message_id',
    );

    const mail = await smtp.waitForMessage((m) =>
      m.to.some((a) => a.address === 'ada@example.com'),
    );
    t.same(mail.from, [{ address: 'orders@shop.example', name: 'The Shop' }], "the tenant's From");
    t.equal(mail.subject, 'Order 1001 shipped');
    t.ok(mail.secure, 'sent over STARTTLS');
    const logo = mail.attachments.find((a) => a.contentId === '<logo>' || a.contentId === 'logo');
    t.ok(logo, 'the inline image is a related part with Content-ID logo');
    t.ok(
      logo && Buffer.from(logo.content).equals(PNG),
      'its bytes came back from the S3 bucket unchanged',
    );
    t.ok(
      s3.requests.some((r) => r.method === 'GET' && r.status === 200),
      'the worker read the image from S3',
    );

    t.equal(fcm.delivered.length, 1, 'FCM got one message: the dead token was not accepted');
    t.match(fcm.delivered[0]!.message, {
      token: phone,
      notification: { title: 'Shipped', body: 'Order 1001 is on its way' },
      data: { order: '1001' },
    });
    const ios = apns.fake.received.filter((r) => r.deviceToken === iphone);
    t.equal(ios.length, 1, 'the iPhone got the push through APNs');
    t.equal(ios[0]?.headers['apns-topic'], 'com.shop.app');
    t.match(ios[0]?.payload, {
      aps: { alert: { title: 'Shipped', body: 'Order 1001 is on its way' } },
      order: '1001',
    });
    const web = pushService.receivedFor(browser.id).find((r) => r.status === 201);
    t.ok(web, 'the browser subscription got the push');
    t.match(
      JSON.parse(web!.plaintext!),
      { title: 'Shipped', body: 'Order 1001 is on its way', data: { order: '1001' } },
      'decrypted with the subscription keys',
    );

    const wa = graph.received.filter((r) => r.method === 'POST' && r.path.endsWith('/messages'));
    t.equal(wa.length, 2);
    t.match(wa[0]!.body, {
      messaging_product: 'whatsapp',
      type: 'template',
      template: { name: FAKE_DEFAULTS.templates[0]!.name },
    });
  }

  // The dead FCM token was removed from the registry.
  {
    const devices = await client.call('GET', '/v2/tenants/shop/users/user-42/devices');
    t.same(
      devices.body.results.map((d: { token: string }) => d.token).sort(),
      ['laptop', phone, iphone].sort(),
      'the dead FCM token was removed from the registry',
    );
  }

  // A signed sent callback arrived for every delivery.
  {
    const posts = await waitFor(
      async () => (receiver.posts.length >= 6 ? receiver.posts : undefined),
      15_000,
      'six callbacks',
    );
    const bodies = posts.map((p) => JSON.parse(p.raw.toString('utf8')));
    t.same(bodies.map((b) => b.delivery_id).sort(), rows.map((d) => d.delivery_id).sort());
    t.ok(bodies.every((b) => b.status === 'sent'));
    t.ok(
      posts.every((p) =>
        verifyEnsSignature(p.raw, client.callbackSecret!, p.headers['x-ens-signature'] as string),
      ),
      'each post verifies with the callback secret',
    );
  }

  // Provider webhooks fill in delivered and read, and a late failure fails the delivery.
  {
    const sms1 = by('sms', '+15551234567');
    const sms2 = by('sms', '+15551234568');
    const wa3 = by('whatsapp', '+15551230003');
    const wa4 = by('whatsapp', '+15551230004');
    t.equal((await twilio.sendStatus(sms1.provider_message_id, 'delivered')).status, 200);
    t.equal(
      (await twilio.sendStatus(sms2.provider_message_id, 'undelivered', { errorCode: 30003 }))
        .status,
      200,
    );
    const waHook = `${ensUrl}/webhooks/whatsapp/webhook`;
    // Out of order, as Meta may deliver them: read before delivered.
    t.equal(
      (await graph.postStatusWebhook(waHook, [{ id: wa3.provider_message_id, status: 'read' }]))
        .status,
      200,
    );
    t.equal(
      (
        await graph.postStatusWebhook(waHook, [
          { id: wa3.provider_message_id, status: 'delivered' },
        ])
      ).status,
      200,
    );
    t.equal(
      (
        await graph.postStatusWebhook(waHook, [
          { id: wa4.provider_message_id, status: 'failed', errorCode: 131026 },
        ])
      ).status,
      200,
    );
    const forged = await fetch(waHook, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': 'sha256=00' },
      body: '{}',
    });
    t.equal(forged.status, 401, 'a forged webhook is refused');
    const challenge = await fetch(
      `${waHook}?hub.mode=subscribe&hub.verify_token=e2e-verify-token&hub.challenge=1158201444`,
    );
    t.equal(await challenge.text(), '1158201444', "Meta's subscription handshake is answered");

    const after = await waitFor(
      async () => {
        const r = await svc.feed(client);
        const get = (id: string) => r.find((d) => d.delivery_id === id);
        const done =
          get(sms2.delivery_id)?.status === 'failed' &&
          get(wa3.delivery_id)?.read_at &&
          get(wa4.delivery_id)?.status === 'failed';
        return done ? get : undefined;
      },
      15_000,
      'webhook updates in the feed',
    );
    // The spec fills delivered_at for whatsapp only: an SMS receipt is kept as an event.
    t.match(
      after(sms1.delivery_id),
      { status: 'sent', delivered_at: null },
      'twilio delivered: status stays sent, delivered_at stays null',
    );
    const events = await svc.rt.db.query(
      'SELECT kind FROM delivery_events WHERE delivery_id = $1',
      [sms1.delivery_id],
    );
    t.same(
      events.rows.map((e) => e.kind),
      ['delivered'],
      "Twilio's report is recorded as an event",
    );
    t.match(after(sms2.delivery_id), {
      status: 'failed',
      last_error: 'twilio: undelivered (error 30003)',
    });
    t.ok(
      after(wa3.delivery_id).delivered_at && after(wa3.delivery_id).read_at,
      'whatsapp read (before delivered) → both set',
    );
    t.ok(
      after(wa3.delivery_id).delivered_at <= after(wa3.delivery_id).read_at,
      'delivered is not after read',
    );
    t.match(after(wa4.delivery_id), { status: 'failed', last_error: /^whatsapp 131026: / });

    const failedPosts = await waitFor(
      async () => {
        const f = receiver.posts
          .map((p) => JSON.parse(p.raw.toString('utf8')))
          .filter((b) => b.status === 'failed');
        return f.length >= 2 ? f : undefined;
      },
      15_000,
      'two failed callbacks',
    );
    t.same(
      failedPosts.map((b) => b.delivery_id).sort(),
      [sms2.delivery_id, wa4.delivery_id].sort(),
      'each late failure posts a failed callback',
    );
    // sms2 has two callbacks: its terminal state's (sent), keyed by the delivery's id, and the
    // late failure's, with an id of its own (migration 022); the console's page lists both.
    const keys = await waitFor(
      async () => {
        const { rows } = await svc.rt.db.query<{ first: boolean; status: string }>(
          `SELECT id = delivery_id AS first, status FROM callbacks WHERE delivery_id = $1 ORDER BY created_at`,
          [sms2.delivery_id],
        );
        return rows.length === 2 && rows.every((r) => r.status === 'delivered') ? rows : undefined;
      },
      5_000,
      'both of sms2’s callbacks recorded',
    );
    t.same(
      keys.map((r) => r.first),
      [true, false],
      'the first callback is keyed by its delivery, the late one has its own id',
    );
    const page = await loadDelivery(svc.rt.db, sms2.delivery_id);
    t.equal(page?.callbacks.length, 2, 'the console finds both callbacks of the delivery');
    t.same(
      page?.callbacks.map((c) => c.attempts_list.length),
      [1, 1],
      'and each one’s post',
    );
  }
});
