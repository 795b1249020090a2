import t from 'tap';
import { MAX_DEVICES_PER_USER } from '@ens/core';
import { startTestService } from '../harness/service.ts';

const FCM_TOKEN =
  'dGVzdC1mY20tdG9rZW4:APA91bHPRgkF3JUikC4ENAHEeMrd41Zxv3hVZjC9KtT8OvPVGJ-hQMRKRrZuJAEcl7B338qju59zJMjw2DELjzEvxwYv7hH5Ynpc1ODQ0aT4U4OFEeco8ohsN5PjL1iC2dNtk2BAokeMCg2ZXKqpc8FXKmhX94kIxQ';
const APNS_TOKEN = 'a'.repeat(8) + '0123456789abcdef'.repeat(3) + 'b'.repeat(8);
const SUBSCRIPTION = {
  endpoint: 'https://updates.push.services.mozilla.com/wpush/v2/gAAAAABk',
  keys: {
    p256dh:
      'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM',
    auth: 'tBHItJI5svbpez7KI4CCXg',
  },
};

/** The device registry ENS keeps per tenant for push: register, list, remove, and its refusals. */
t.test('/v2/tenants/{tenant}/users/{user_id}/devices', async (t) => {
  const svc = await startTestService(t);
  const owner = await svc.createClient();
  const stranger = await svc.createClient();
  await svc.tenant(owner, 'shop');
  await svc.tenant(stranger, 'shop');
  const base = '/v2/tenants/shop/users/user-1/devices';
  const rows = async () =>
    (await svc.rt.db.query('SELECT count(*)::int AS n FROM devices')).rows[0].n as number;

  t.test('a body-less PUT registers an FCM token (201), again is 200; GET lists it', async (t) => {
    const first = await owner.call('PUT', `${base}/${FCM_TOKEN}`);
    t.equal(first.status, 201, first.text);
    t.same(Object.keys(first.body).sort(), [
      'created_at',
      'platform',
      'subscription',
      'token',
      'updated_at',
    ]);
    t.equal(first.body.platform, 'fcm');
    t.equal(first.body.token, FCM_TOKEN);
    t.equal(first.body.subscription, null);
    const again = await owner.call('PUT', `${base}/${FCM_TOKEN}`);
    t.equal(again.status, 200);
    t.equal(again.body.created_at, first.body.created_at, 'the registration is kept, not replaced');
    const list = await owner.call('GET', base);
    t.equal(list.status, 200);
    t.same(
      list.body.results.map((d: { token: string }) => d.token),
      [FCM_TOKEN],
    );
  });

  t.test('APNs and web push devices; the subscription is kept', async (t) => {
    const apns = await owner.call('PUT', `${base}/${APNS_TOKEN}`, { body: { platform: 'apns' } });
    t.equal(apns.status, 201, apns.text);
    t.equal(apns.body.platform, 'apns');
    const web = await owner.call('PUT', `${base}/laptop-firefox`, {
      body: { platform: 'webpush', subscription: SUBSCRIPTION },
    });
    t.equal(web.status, 201, web.text);
    t.same(web.body.subscription, SUBSCRIPTION);
    const list = await owner.call('GET', base);
    t.same(list.body.results.map((d: { platform: string }) => d.platform).sort(), [
      'apns',
      'fcm',
      'webpush',
    ]);
  });

  t.test('bad registrations are 400 with a detail and store nothing', async (t) => {
    const before = await rows();
    const cases: [string, unknown, RegExp][] = [
      ['laptop-chrome', { platform: 'webpush' }, /subscription is required/],
      ['some-token', { platform: 'fcm', subscription: SUBSCRIPTION }, /only for webpush/],
      ['not-hex', { platform: 'apns' }, /hexadecimal/],
      ['x', { platform: 'blackberry' }, /platform/],
      [
        'x',
        { platform: 'webpush', subscription: { endpoint: 'ftp://x', keys: SUBSCRIPTION.keys } },
        /endpoint/,
      ],
      ['x', { token: 'in-body' }, /token/],
    ];
    for (const [token, body, detail] of cases) {
      const r = await owner.call('PUT', `${base}/${token}`, { body });
      t.equal(r.status, 400, `${JSON.stringify(body)} → 400`);
      t.match(r.body.detail, detail, r.body.detail);
    }
    t.equal(await rows(), before, 'nothing stored');
  });

  t.test(
    "an unknown tenant is 404; another client's tenant of the same name is its own",
    async (t) => {
      const r = await owner.call('PUT', `/v2/tenants/nope/users/u/devices/${FCM_TOKEN}`);
      t.equal(r.status, 404);
      t.match(r.body.detail, /Tenant "nope"/);
      t.equal((await owner.call('GET', '/v2/tenants/nope/users/u/devices')).status, 404);
      const theirs = await stranger.call('GET', base);
      t.equal(theirs.status, 200);
      t.same(theirs.body.results, [], "the stranger's tenant 'shop' has no devices of the owner's");
      t.equal(
        (await stranger.call('DELETE', `${base}/${FCM_TOKEN}`)).status,
        404,
        "and cannot delete the owner's",
      );
    },
  );

  t.test('an unknown user has an empty list', async (t) => {
    const r = await owner.call('GET', '/v2/tenants/shop/users/nobody/devices');
    t.equal(r.status, 200);
    t.same(r.body, { results: [] });
  });

  t.test('DELETE removes a device (204); again is 404', async (t) => {
    t.equal((await owner.call('DELETE', `${base}/${APNS_TOKEN}`)).status, 204);
    const again = await owner.call('DELETE', `${base}/${APNS_TOKEN}`);
    t.equal(again.status, 404);
    t.match(again.body.detail, /no device with this token/);
    const list = await owner.call('GET', base);
    t.notOk(list.body.results.some((d: { token: string }) => d.token === APNS_TOKEN));
  });

  t.test(
    `a user holds at most ${MAX_DEVICES_PER_USER} devices, even when registrations race`,
    async (t) => {
      const user = '/v2/tenants/shop/users/collector/devices';
      const puts = await Promise.all(
        Array.from({ length: MAX_DEVICES_PER_USER + 10 }, (_, i) =>
          owner.call('PUT', `${user}/token-${i}`),
        ),
      );
      t.equal(puts.filter((r) => r.status === 201).length, MAX_DEVICES_PER_USER);
      const refused = puts.filter((r) => r.status === 409);
      t.equal(refused.length, 10);
      t.match(refused[0]!.body.detail, /already has 100 devices/);
      t.equal(
        (await owner.call('PUT', `${user}/token-0`)).status,
        200,
        'updating a registered device is still allowed',
      );
      t.equal((await owner.call('GET', user)).body.results.length, MAX_DEVICES_PER_USER);
    },
  );

  t.test('deleting a tenant takes its devices with it', async (t) => {
    await svc.tenant(owner, 'short-lived');
    t.equal(
      (await owner.call('PUT', `/v2/tenants/short-lived/users/u/devices/${FCM_TOKEN}`)).status,
      201,
    );
    t.equal((await owner.call('DELETE', '/v2/tenants/short-lived')).status, 204);
    const left = await svc.rt.db.query(
      "SELECT count(*)::int AS n FROM devices WHERE tenant = 'short-lived'",
    );
    t.equal(left.rows[0].n, 0);
  });
});

t.test(
  'tenant settings: the keys plugins read are checked, others kept for third-party plugins',
  async (t) => {
    const svc = await startTestService(t);
    const c = await svc.createClient();
    const good = await c.call('POST', '/v2/tenants', {
      body: {
        tenant: 'configured',
        settings: {
          sender_id: 'ACME',
          from_address: 'news@acme.example',
          from_name: 'Acme News',
          whatsapp_phone_number_id: '106540352242922',
          push_app: 'acme-ios',
          acme_custom: { x: 1 },
        },
      },
    });
    t.equal(good.status, 201, good.text);
    t.same(good.body.settings.acme_custom, { x: 1 });
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ from_address: 'not an address' }, /from_address/],
      [{ sender_id: 'WAY-TOO-LONG-SENDER' }, /sender_id/],
      [{ whatsapp_phone_number_id: '+1 555' }, /whatsapp_phone_number_id/],
      [{ from_name: 'Evil\r\nBcc: x@y.z' }, /from_name/],
    ];
    for (const [settings, detail] of bad) {
      const r = await c.call('POST', '/v2/tenants', { body: { tenant: 'bad-settings', settings } });
      t.equal(r.status, 400, JSON.stringify(settings));
      t.match(r.body.detail, detail);
      const p = await c.call('PATCH', '/v2/tenants/configured', { body: { settings } });
      t.equal(p.status, 400, `PATCH ${JSON.stringify(settings)}`);
    }
    t.equal((await c.call('GET', '/v2/tenants/bad-settings')).status, 404, 'nothing was created');
    t.equal(
      (await c.call('GET', '/v2/tenants/configured')).body.settings.from_name,
      'Acme News',
      'nothing was changed',
    );
  },
);
