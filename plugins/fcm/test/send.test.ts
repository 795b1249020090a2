import t from 'tap';
import { checkConfig } from '@ens/plugin-sdk';
import plugin from '../src/index.ts';
import { retryAfterMs as parseRetryAfter } from '@ens/plugin-sdk';
import { classifySendFailure, readFailure } from '../src/fcm-errors.ts';
import { deviceToken, FakeFcm, type FcmOutcome } from '../src/testing/fake-fcm.ts';
import { failureOf, provider, pushTo } from './helpers.ts';

const fake = new FakeFcm();
const baseUrl = await fake.start();
t.teardown(() => fake.stop());
const sa = fake.serviceAccount({ projectId: 'ens-send' });
const { p } = await provider({ serviceAccount: sa, baseUrl });

t.test('the request: URL, headers and the exact JSON body', async (t) => {
  const token = deviceToken();
  const r = await p.send(
    pushTo(token, {
      content: {
        kind: 'rendered',
        subject: 'Order shipped',
        body: 'Your order 1234 is on its way',
        data: { order: '1234', screen: 'orders' },
      },
    }),
  );
  const req = fake.sendRequests().at(-1)!;
  t.equal(req.method, 'POST');
  t.equal(req.path, '/v1/projects/ens-send/messages:send');
  t.match(req.headers.authorization, /^Bearer ya29\.c\.fake-[\w-]+$/);
  t.match(req.headers['content-type'], /^application\/json/);
  t.equal(
    req.body,
    JSON.stringify({
      message: {
        token,
        notification: { title: 'Order shipped', body: 'Your order 1234 is on its way' },
        data: { order: '1234', screen: 'orders' },
      },
    }),
    'exactly this body',
  );
  t.equal(req.status, 200);
  const delivered = fake.delivered.at(-1)!;
  t.equal(
    r.providerMessageId,
    delivered.name,
    'providerMessageId is the message name FCM answered',
  );
  t.match(r.providerMessageId, /^projects\/ens-send\/messages\/0:\d+%[0-9a-f]{16}$/);
});

t.test(
  'without subject the notification has a body only; without data there is no data',
  async (t) => {
    const token = deviceToken();
    await p.send(pushTo(token, { content: { kind: 'rendered', body: 'Hello' } }));
    t.same(fake.sendRequests().at(-1)!.json, {
      message: { token, notification: { body: 'Hello' } },
    });
  },
);

t.test('data alone makes a data message (no notification block)', async (t) => {
  const token = deviceToken();
  await p.send(pushTo(token, { content: { kind: 'rendered', data: { sync: 'inbox' } } }));
  t.same(fake.sendRequests().at(-1)!.json, { message: { token, data: { sync: 'inbox' } } });
});

t.test("every FCM error is classified, with FCM's reason in the message", async (t) => {
  fake.quotaRetryAfterSec = 7;
  const cases: [
    FcmOutcome,
    { kind: string; deviceGone?: boolean; retryAfterMs?: number; message: RegExp | string },
  ][] = [
    [
      'unregistered',
      {
        kind: 'permanent',
        deviceGone: true,
        message: 'fcm UNREGISTERED: Requested entity was not found.',
      },
    ],
    [
      'invalid-token',
      {
        kind: 'permanent',
        deviceGone: true,
        message:
          'fcm INVALID_ARGUMENT: The registration token is not a valid FCM registration token',
      },
    ],
    [
      'invalid-argument',
      {
        kind: 'permanent',
        deviceGone: false,
        message: 'fcm INVALID_ARGUMENT: Request contains an invalid argument.',
      },
    ],
    [
      'sender-id-mismatch',
      {
        kind: 'permanent',
        deviceGone: false,
        message:
          /^fcm SENDER_ID_MISMATCH: SenderId mismatch \(the device token belongs to another Firebase project/,
      },
    ],
    [
      'quota-exceeded',
      {
        kind: 'rate_limited',
        retryAfterMs: 7000,
        message: 'fcm QUOTA_EXCEEDED: Sending limit exceeded for the message target.',
      },
    ],
    [
      'unavailable',
      { kind: 'transient', message: 'fcm UNAVAILABLE: The service is currently unavailable.' },
    ],
    ['internal', { kind: 'transient', message: 'fcm INTERNAL: Internal error encountered.' }],
    [
      'third-party-auth',
      {
        kind: 'transient',
        message:
          /^fcm THIRD_PARTY_AUTH_ERROR: Auth error from APNS or Web Push Service \(the APNs or Web Push credentials/,
      },
    ],
  ];
  for (const [outcome, want] of cases) {
    const before = fake.sendRequests().length;
    const f = await failureOf(p, pushTo(deviceToken(outcome)));
    if (!('kind' in f)) {
      t.fail(`${outcome}: send resolved`);
      continue;
    }
    t.equal(f.kind, want.kind, `${outcome} → ${want.kind}`);
    t.equal(
      f.deviceGone,
      want.deviceGone ?? false,
      `${outcome}: deviceGone ${want.deviceGone ?? false}`,
    );
    t.equal(
      f.retryAfterMs,
      want.retryAfterMs,
      `${outcome}: retryAfterMs ${String(want.retryAfterMs)}`,
    );
    if (typeof want.message === 'string') t.equal(f.message, want.message, `${outcome}: message`);
    else t.match(f.message, want.message, `${outcome}: message`);
    t.equal(
      fake.sendRequests().length - before,
      1,
      `${outcome}: one request (only a refused access token is retried)`,
    );
  }
});

t.test('UNAVAILABLE with Retry-After is rate-limited with that hint', async (t) => {
  fake.unavailableRetryAfterSec = 30;
  t.teardown(() => {
    fake.unavailableRetryAfterSec = undefined;
  });
  const f = await failureOf(p, pushTo(deviceToken('unavailable')));
  t.equal('kind' in f && f.kind, 'rate_limited');
  t.equal('kind' in f && f.retryAfterMs, 30_000);
});

t.test('a reserved data key is refused by FCM: permanent, with the field', async (t) => {
  const f = await failureOf(
    p,
    pushTo(deviceToken(), { content: { kind: 'rendered', body: 'x', data: { from: 'me' } } }),
  );
  t.equal('kind' in f && f.kind, 'permanent');
  t.equal('kind' in f && f.deviceGone, false);
  t.equal(
    'message' in f && f.message,
    'fcm INVALID_ARGUMENT: Invalid data payload key: from is reserved by FCM',
  );
});

t.test(
  'a field violation on message.token marks the device gone, whatever the message says',
  async (t) => {
    const body = JSON.stringify({
      error: {
        code: 400,
        message: 'Request contains an invalid argument.',
        status: 'INVALID_ARGUMENT',
        details: [
          {
            '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError',
            errorCode: 'INVALID_ARGUMENT',
          },
          {
            '@type': 'type.googleapis.com/google.rpc.BadRequest',
            fieldViolations: [
              { field: 'message.token', description: 'Invalid registration token' },
            ],
          },
        ],
      },
    });
    const e = classifySendFailure(readFailure(400, null, body));
    t.equal(e.ensErrorKind, 'permanent');
    t.equal(e.deviceGone, true);
    t.equal(
      e.message,
      'fcm INVALID_ARGUMENT: Request contains an invalid argument. (message.token: Invalid ' +
        'registration token)',
    );
    const other = classifySendFailure(
      readFailure(
        400,
        null,
        JSON.stringify({
          error: {
            code: 400,
            message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 12",
            status: 'INVALID_ARGUMENT',
            details: [
              {
                '@type': 'type.googleapis.com/google.rpc.BadRequest',
                fieldViolations: [
                  {
                    field: 'message.data[0].value',
                    description: "Invalid value at 'message.data[0].value' (TYPE_STRING), 12",
                  },
                ],
              },
            ],
          },
        }),
      ),
    );
    t.equal(other.deviceGone, false, 'a violation on another field is not about the device');
    t.equal(other.ensErrorKind, 'permanent');
  },
);

t.test(
  'classification without FCM details falls back to the canonical status, then HTTP',
  async (t) => {
    const google = (code: number, status: string) =>
      JSON.stringify({ error: { code, message: 'm', status } });
    t.equal(
      classifySendFailure(readFailure(404, null, google(404, 'NOT_FOUND'))).deviceGone,
      true,
      'a Google NOT_FOUND is an unregistered token',
    );
    const html404 = classifySendFailure(readFailure(404, null, '<html>Not Found</html>'));
    t.equal(
      html404.ensErrorKind,
      'transient',
      'a 404 without a Google error (wrong baseUrl) is a configuration fault',
    );
    t.equal(html404.deviceGone, false, 'and never deletes tokens');
    t.equal(
      classifySendFailure(readFailure(429, '3', google(429, 'RESOURCE_EXHAUSTED'))).retryAfterMs,
      3000,
    );
    t.equal(classifySendFailure(readFailure(502, null, 'Bad Gateway')).ensErrorKind, 'transient');
    t.equal(
      classifySendFailure(readFailure(403, null, google(403, 'PERMISSION_DENIED'))).ensErrorKind,
      'transient',
    );
    t.equal(classifySendFailure(readFailure(413, null, 'too large')).ensErrorKind, 'permanent');
    t.equal(classifySendFailure(readFailure(503, '5', 'busy')).ensErrorKind, 'rate_limited');
  },
);

t.test('Retry-After as seconds or as an HTTP date', async (t) => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  t.equal(parseRetryAfter('120', now), 120_000);
  t.equal(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', now), 30_000);
  t.equal(parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now), 0, 'a date in the past means now');
  t.equal(parseRetryAfter('soon', now), undefined);
  t.equal(parseRetryAfter(null, now), undefined);
});

t.test(
  'a project the service account may not send for is a transient configuration fault',
  async (t) => {
    const { p: wrong } = await provider({
      serviceAccount: sa,
      projectId: 'someone-elses-project',
      baseUrl,
    });
    const f = await failureOf(wrong, pushTo(deviceToken()));
    t.equal('kind' in f && f.kind, 'transient');
    t.match(
      'message' in f && f.message,
      /^fcm PERMISSION_DENIED: Permission 'cloudmessaging\.messages\.create' denied on resource '\/\/cloudresourcemanager\.googleapis\.com\/projects\/someone-elses-project'/,
    );
    t.equal(
      fake.sendRequests().at(-1)!.path,
      '/v1/projects/someone-elses-project/messages:send',
      'projectId overrides the account project_id',
    );
  },
);

t.test("a wrong baseUrl (Google's HTML 404) is transient and keeps the device", async (t) => {
  const { p: wrong } = await provider({ serviceAccount: sa, baseUrl: `${baseUrl}/nope` });
  const f = await failureOf(wrong, pushTo(deviceToken()));
  t.equal('kind' in f && f.kind, 'transient');
  t.equal('kind' in f && f.deviceGone, false);
  t.match('message' in f && f.message, /^fcm HTTP 404: <!DOCTYPE html>/);
});

t.test('an FCM that never answers is transient after timeoutMs', async (t) => {
  const { p: quick } = await provider({ serviceAccount: sa, baseUrl, timeoutMs: 300 });
  await quick.send(pushTo(deviceToken())); // the token exchange is not what times out here
  const started = Date.now();
  const f = await failureOf(quick, pushTo(deviceToken('hang')));
  t.equal('kind' in f && f.kind, 'transient');
  t.match(
    'message' in f && f.message,
    /^fcm: send to http:\/\/127\.0\.0\.1:\d+\/v1\/projects\/ens-send\/messages:send failed: no answer within 300 ms$/,
  );
  t.ok(Date.now() - started < 5_000);
});

t.test('sends that cannot go to FCM', async (t) => {
  const noDevice = { ...pushTo('x') };
  delete (noDevice as { device?: unknown }).device;
  let f = await failureOf(p, noDevice);
  t.equal('kind' in f && f.kind, 'permanent', 'no device');
  f = await failureOf(
    p,
    pushTo('x', { device: { token: 'x', platform: 'apns', subscription: null } }),
  );
  t.equal('kind' in f && f.kind, 'permanent', 'an APNs device');
  t.match('message' in f && f.message, /platform is apns/);
  f = await failureOf(p, pushTo(''));
  t.equal('kind' in f && f.deviceGone, true, 'an empty token is gone');
  f = await failureOf(
    p,
    pushTo(deviceToken(), { content: { kind: 'rendered', body: 'x', data: { n: 12 } } }),
  );
  t.equal('kind' in f && f.kind, 'permanent', 'a non-string data value');
  t.equal('message' in f && f.message, 'fcm: content.data.n must be a string, not number');
});

t.test('push_app picks the Firebase project; the default serves tenants without one', async (t) => {
  const shop = fake.serviceAccount({ projectId: 'shop-app' });
  const news = fake.serviceAccount({ projectId: 'news-app' });
  const { p: multi } = await provider({
    apps: { shop, news: JSON.stringify(news) },
    defaultApp: 'shop',
    baseUrl,
  });
  await multi.send(pushTo(deviceToken(), { tenantSettings: { push_app: 'news' } }));
  const toNews = fake.sendRequests().at(-1)!;
  t.equal(toNews.path, '/v1/projects/news-app/messages:send');
  await multi.send(pushTo(deviceToken()));
  const toShop = fake.sendRequests().at(-1)!;
  t.equal(toShop.path, '/v1/projects/shop-app/messages:send', 'no push_app: the defaultApp');
  t.not(
    toNews.headers.authorization,
    toShop.headers.authorization,
    'each app has its own access token',
  );
  const f = await failureOf(
    multi,
    pushTo(deviceToken(), { tenantSettings: { push_app: 'games' } }),
  );
  t.equal('kind' in f && f.kind, 'permanent');
  t.equal(
    'message' in f && f.message,
    'fcm: tenant conformance sets push_app "games", which is not a configured FCM app (shop, news)',
  );

  const { p: single } = await provider({ apps: { only: shop }, baseUrl });
  await single.send(pushTo(deviceToken()));
  t.equal(
    fake.sendRequests().at(-1)!.path,
    '/v1/projects/shop-app/messages:send',
    'one app needs no defaultApp',
  );

  await p.send(pushTo(deviceToken(), { tenantSettings: { push_app: 'news' } }));
  t.equal(
    fake.sendRequests().at(-1)!.path,
    '/v1/projects/ens-send/messages:send',
    'with a single serviceAccount push_app is not read',
  );

  await multi.checkCredentials!();
  t.pass('checkCredentials covers every app');
});

t.test('configurations refused at start, naming the setting', async (t) => {
  const refuses = async (config: unknown, msg: RegExp, why: string) => {
    await t.rejects(
      async () =>
        plugin.create(
          checkConfig('@ens/plugin-fcm', plugin, config) as never,
          { logger: console } as never,
        ),
      { message: msg },
      why,
    );
  };
  await refuses({ baseUrl }, /needs serviceAccount .* or apps/, 'no credentials');
  await refuses(
    { serviceAccount: sa, apps: { a: sa }, baseUrl },
    /both serviceAccount and apps/,
    'both',
  );
  await refuses(
    { apps: { a: sa, b: sa }, baseUrl },
    /config \/defaultApp is required when apps holds more than one app \(a, b\)/,
    'ambiguous default',
  );
  await refuses(
    { apps: { a: sa }, defaultApp: 'z', baseUrl },
    /config \/defaultApp "z" is not one of apps \(a\)/,
    'unknown default',
  );
  await refuses(
    { serviceAccount: '{not json', baseUrl },
    /config \/serviceAccount is not a service-account JSON document/,
    'bad JSON text',
  );
  await refuses(
    { serviceAccount: JSON.stringify({ ...sa, type: 'authorized_user' }), baseUrl },
    /config \/serviceAccount\/type /,
    'not a service account',
  );
  await refuses(
    { serviceAccount: { ...sa, private_key: 'not a key' }, baseUrl },
    /config \/serviceAccount\/private_key is not a PEM RSA private key/,
    'bad key',
  );
  await refuses(
    { apps: { a: { ...sa, private_key: 'nope' } } },
    /config \/apps\/a\/private_key/,
    'bad key in an app',
  );
  t.throws(
    () =>
      checkConfig('@ens/plugin-fcm', plugin, {
        serviceAccount: { ...sa, client_email: undefined },
      }),
    { message: /config \/serviceAccount/ },
    'schema: a key file without client_email',
  );
  t.throws(
    () => checkConfig('@ens/plugin-fcm', plugin, { serviceAccount: sa, baseUrl: 'not a url' }),
    { message: /config \/baseUrl/ },
  );
  t.throws(() => checkConfig('@ens/plugin-fcm', plugin, { serviceAccount: sa, timeoutMs: 0 }), {
    message: /config \/timeoutMs/,
  });
  t.throws(() => checkConfig('@ens/plugin-fcm', plugin, { serviceAccount: sa, projectID: 'x' }), {
    message: /config \/projectID is not a setting this plugin knows/,
  });
  const defaults = checkConfig('@ens/plugin-fcm', plugin, { serviceAccount: sa }) as {
    baseUrl: string;
    timeoutMs: number;
  };
  t.equal(defaults.baseUrl, 'https://fcm.googleapis.com');
  t.equal(defaults.timeoutMs, 10_000);
  let msg = '';
  try {
    await plugin.create(
      { serviceAccount: { ...sa, private_key: `${sa.private_key.slice(0, 60)}garbage` } },
      { logger: console } as never,
    );
  } catch (e) {
    msg = (e as Error).message;
  }
  t.match(msg, /private_key is not a PEM RSA private key/);
  t.notMatch(msg, /PRIVATE KEY|garbage/, 'the key is not in the message');
});
