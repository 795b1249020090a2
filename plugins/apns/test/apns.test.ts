import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:net';
import t, { type Test } from 'tap';
import { checkConfig, classifyError, type OutboundMessage, type Provider } from '@ens/plugin-sdk';
import { conformanceTest, recordingContext } from '@ens/plugin-sdk/conformance';
import plugin, { apnsIdFor, createApnsProvider, type ApnsConfig } from '../src/index.ts';
import fixture from '../src/conformance.ts';
import {
  APNS_REASONS,
  fakeDeviceToken,
  generateApnsKey,
  startFakeApns,
  type ApnsReason,
  type FakeApns,
} from '../src/testing/fake-apns.ts';

const DELIVERY = '0190a0b0-1111-7000-8000-00000000abcd';
const MIN = 60_000;

const push = (token: string, over: Partial<OutboundMessage> = {}): OutboundMessage => ({
  deliveryId: DELIVERY,
  attempt: 1,
  channel: 'push',
  recipient: 'user-1',
  tenant: 'acme',
  tenantSettings: {},
  eventType: 'order.shipped',
  reference: null,
  content: {
    kind: 'rendered',
    subject: 'Shipped',
    body: 'Your order is on its way',
    data: { order_id: '42', deep_link: 'acme://orders/42' },
  },
  device: { token, platform: 'apns', subscription: null },
  ...over,
});

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function rejection(p: Promise<unknown>) {
  try {
    await p;
  } catch (e) {
    return classifyError(e);
  }
  throw new Error('expected the send to fail');
}

/** A fake plus a provider on a clock the test moves (the fake reads the same clock). */
async function setup(t: Test, over: Partial<ApnsConfig> = {}) {
  let clock = Date.parse('2025-03-01T12:00:00Z');
  const env = await startFakeApns({
    topics: ['com.example.app', 'com.example.other'],
    now: () => clock,
  });
  const config = checkConfig('@ens/plugin-apns', plugin, { ...env.config, ...over }) as ApnsConfig;
  const ctx = recordingContext();
  const provider = createApnsProvider(config, ctx, { now: () => clock });
  t.teardown(async () => {
    await provider.close?.();
    await env.fake.stop();
  });
  /**
   * Another provider on the same fake and clock, with some settings changed; closed at teardown.
   */
  const another = (change: Partial<ApnsConfig>) => {
    const p = createApnsProvider({ ...config, ...change }, recordingContext(), {
      now: () => clock,
    });
    t.teardown(() => p.close?.());
    return p;
  };
  return {
    ...env,
    provider,
    ctx,
    another,
    advance: (ms: number) => {
      clock += ms;
    },
    get now() {
      return clock;
    },
  };
}

const jwtOf = (fake: FakeApns, i: number) =>
  fake.received[i]!.headers.authorization!.replace(/^bearer /, '');

t.test('a notification: exact headers, body and provider message id', async (t) => {
  const s = await setup(t, { sound: 'default' });
  const token = fakeDeviceToken('ok');
  const res = await s.provider.send(push(token));
  t.equal(res.providerMessageId, DELIVERY, 'providerMessageId is the apns-id APNs echoed');
  t.equal(s.fake.received.length, 1);
  const r = s.fake.received[0]!;
  t.equal(r.method, 'POST');
  t.equal(r.path, `/3/device/${token}`);
  t.match(
    r.headers.authorization,
    /^bearer [\w-]+\.[\w-]+\.[\w-]+$/,
    'authorization: bearer <JWT>',
  );
  t.same(
    Object.fromEntries(Object.entries(r.headers).filter(([k]) => k !== 'authorization')),
    {
      'apns-topic': 'com.example.app',
      'apns-push-type': 'alert',
      'apns-priority': '10',
      'apns-expiration': String(Math.floor(s.now / 1000) + 86_400),
      'apns-id': DELIVERY,
      'content-length': String(r.rawBody.length),
    },
    'exactly the apns-* headers Apple documents',
  );
  t.strictSame(r.payload, {
    aps: { alert: { title: 'Shipped', body: 'Your order is on its way' }, sound: 'default' },
    order_id: '42',
    deep_link: 'acme://orders/42',
  });
  t.strictSame(
    r.jwt?.header,
    { alg: 'ES256', typ: 'JWT', kid: 'KEY1234567' },
    'JWT header: ES256 and the key id',
  );
  t.strictSame(
    r.jwt?.claims,
    { iss: 'TEAM123456', iat: Math.floor(s.now / 1000) },
    'JWT claims: the team id and iat, nothing else',
  );
  t.same(r.answer, { status: 200 });
});

t.test('payload and header variants', async (t) => {
  const s = await setup(t, { expiration: 0, apps: { other: { topic: 'com.example.other' } } });
  const token = fakeDeviceToken('ok', 7);

  await s.provider.send(push(token, { content: { kind: 'rendered', body: 'no title' } }));
  t.strictSame(
    s.fake.received[0]!.payload,
    { aps: { alert: { body: 'no title' } } },
    'without subject the alert has only a body, and no sound unless configured',
  );
  t.equal(
    s.fake.received[0]!.headers['apns-expiration'],
    '0',
    'expiration 0: deliver once, never stored',
  );

  const odd = 'delivery-without-uuid';
  const res = await s.provider.send(push(token, { deliveryId: odd }));
  t.match(
    res.providerMessageId,
    /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    'a non-UUID delivery id becomes a name-based UUID',
  );
  t.equal(apnsIdFor(odd), res.providerMessageId, 'the same one every attempt');
  t.equal(
    apnsIdFor(DELIVERY.toUpperCase()),
    DELIVERY,
    'a UUID delivery id is used as is, lower case',
  );

  await s.provider.send(push(token, { tenantSettings: { push_app: 'other' } }));
  t.equal(
    s.fake.received[2]!.headers['apns-topic'],
    'com.example.other',
    "the tenant's push_app picks a configured app's topic",
  );

  const before = s.fake.received.length;
  const unknownApp = await rejection(
    s.provider.send(push(token, { tenantSettings: { push_app: 'com.evil.app' } })),
  );
  t.equal(unknownApp.kind, 'permanent');
  t.match(
    unknownApp.message,
    /push_app "com\.evil\.app".*apps: other/,
    'push_app must name a configured app, never a raw topic',
  );
  const aps = await rejection(
    s.provider.send(push(token, { content: { kind: 'rendered', body: 'x', data: { aps: 'x' } } })),
  );
  t.equal(aps.kind, 'permanent');
  t.match(aps.message, /"aps"/);
  const noBody = await rejection(
    s.provider.send(push(token, { content: { kind: 'rendered', subject: 'only a title' } })),
  );
  t.equal(noBody.kind, 'permanent');
  const notHex = await rejection(s.provider.send(push('not-a-token')));
  t.equal(notHex.kind, 'permanent');
  t.ok(notHex.deviceGone, 'a token that is not hex can never work: deviceGone');
  const noDevice = await rejection(s.provider.send(push(token, { device: undefined })));
  t.equal(noDevice.kind, 'permanent');
  const fcm = await rejection(
    s.provider.send(push(token, { device: { token, platform: 'fcm', subscription: null } })),
  );
  t.match(fcm.message, /platform is fcm/);
  t.equal(s.fake.received.length, before, 'nothing that fails locally reaches APNs');
});

t.test('background pushes: content-available, priority 5, data only', async (t) => {
  const s = await setup(t, { pushType: 'background' });
  await s.provider.send(push(fakeDeviceToken('ok')));
  const r = s.fake.received[0]!;
  t.equal(r.headers['apns-push-type'], 'background');
  t.equal(
    r.headers['apns-priority'],
    '5',
    'Apple requires priority 5 (or 1) for background pushes',
  );
  t.strictSame(r.payload, {
    aps: { 'content-available': 1 },
    order_id: '42',
    deep_link: 'acme://orders/42',
  });
  t.throws(
    () =>
      createApnsProvider({ ...s.config, pushType: 'background', priority: 10 }, recordingContext()),
    /priority/,
    'background with priority 10 is refused at start-up',
  );
});

t.test('the provider token is reused, renewed at 50 minutes, never sooner than 20', async (t) => {
  const s = await setup(t);
  s.fake.tokenUpdateMinIntervalSec = 20 * 60; // the fake enforces Apple's TooManyProviderTokenUpdates rule
  const token = fakeDeviceToken('ok');
  await s.provider.send(push(token));
  await s.provider.send(push(token));
  s.advance(49 * MIN);
  await s.provider.send(push(token));
  t.equal(
    new Set([0, 1, 2].map((i) => jwtOf(s.fake, i))).size,
    1,
    'one JWT for every send within 50 minutes',
  );
  s.advance(2 * MIN);
  await s.provider.send(push(token));
  t.not(jwtOf(s.fake, 3), jwtOf(s.fake, 0), 'a new JWT after 50 minutes');
  t.equal(s.fake.received[3]!.jwt?.claims.iat, Math.floor(s.now / 1000), 'with the current iat');
  t.ok(
    s.fake.received.every((r) => (r.answer as { status: number }).status === 200),
    'APNs never saw too many token updates',
  );
});

t.test('403 ExpiredProviderToken: renew once and send again', async (t) => {
  const s = await setup(t);
  const token = fakeDeviceToken('ok');
  await s.provider.send(push(token));
  s.advance(30 * MIN);
  s.fake.tokenMaxAgeSec = 25 * 60; // APNs decides the 30-minute-old token is stale
  const res = await s.provider.send(push(token));
  t.equal(res.providerMessageId, DELIVERY);
  t.equal(s.fake.received.length, 3);
  t.same(s.fake.received[1]!.answer, { status: 403, reason: 'ExpiredProviderToken' });
  t.same(s.fake.received[2]!.answer, { status: 200 });
  t.not(jwtOf(s.fake, 2), jwtOf(s.fake, 1), 'the retry carries a new JWT');
  t.equal(
    s.fake.received[2]!.headers['apns-id'],
    s.fake.received[1]!.headers['apns-id'],
    'with the same apns-id',
  );
  await s.provider.send(push(token));
  t.equal(jwtOf(s.fake, 3), jwtOf(s.fake, 2), 'the renewed JWT is kept for later sends');
});

t.test(
  'ExpiredProviderToken for a young token is a clock fault: no renewal, transient',
  async (t) => {
    const s = await setup(t);
    const token = fakeDeviceToken('ok');
    await s.provider.send(push(token));
    s.advance(2 * MIN);
    s.fake.tokenMaxAgeSec = 60;
    const e = await rejection(s.provider.send(push(token)));
    t.equal(e.kind, 'transient');
    t.match(e.message, /apns 403 ExpiredProviderToken.*clock/);
    t.equal(
      s.fake.received.length,
      2,
      'not retried: a new token now would break the 20-minute rule',
    );
  },
);

t.test('ExpiredProviderToken again after renewal is transient', async (t) => {
  const s = await setup(t);
  const token = fakeDeviceToken('ok');
  await s.provider.send(push(token));
  s.advance(25 * MIN);
  s.fake.now = () => s.now + 2 * 3600_000; // APNs' clock is two hours ahead
  const e = await rejection(s.provider.send(push(token)));
  t.equal(e.kind, 'transient');
  t.match(e.message, /ExpiredProviderToken even with a token minted just now/);
  t.equal(s.fake.received.length, 3, 'renewed and retried once, no more');
});

t.test('one HTTP/2 connection carries every send, concurrent ones included', async (t) => {
  const s = await setup(t);
  // The fake, like APNs, allows one stream until a request proves the provider token.
  const first = await Promise.all(
    Array.from({ length: 10 }, (_, i) => s.provider.send(push(fakeDeviceToken('ok', i)))),
  );
  for (let i = 0; i < 5; i++) await s.provider.send(push(fakeDeviceToken('ok', 100 + i)));
  t.equal(first.length, 10);
  t.equal(s.fake.received.length, 15);
  t.ok(s.fake.received.every((r) => (r.answer as { status: number }).status === 200));
  t.equal(s.fake.sessionsAccepted, 1, 'a single session');
});

t.test('a new connection after APNs closes one (GOAWAY) or the network drops it', async (t) => {
  const s = await setup(t);
  const token = fakeDeviceToken('ok');
  await s.provider.send(push(token));
  s.fake.closeSessions();
  await until(() => s.fake.openSessions === 0);
  await s.provider.send(push(token));
  t.equal(s.fake.sessionsAccepted, 2, 'reconnected after GOAWAY');
  s.fake.destroySessions();
  await until(() => s.fake.openSessions === 0);
  await s.provider.send(push(token));
  t.equal(s.fake.sessionsAccepted, 3, 'reconnected after the connection dropped');
  t.equal(s.fake.received[2]!.session, 3);
});

t.test('a refused stream whose resend fails too: the error names both', async (t) => {
  const s = await setup(t, { timeoutMs: 1_000 });
  // The resend is the first stream of a new connection: it meets the next queued answer, and
  // hangs until the time left runs out.
  s.fake.answerNext('goaway');
  s.fake.answerNext('hang');
  const e = await rejection(s.provider.send(push(fakeDeviceToken('ok'))));
  t.equal(e.kind, 'transient');
  // What became of the resend depends on how far it got in the time left (a loaded machine may
  // not even connect): only that both are named is asserted.
  t.match(
    e.message,
    /^apns: APNs refused the stream \(GOAWAY Shutdown\)[^;]*; sent again on a new connection: \S/,
    "what APNs did first is not lost behind the resend's failure",
  );
});

t.test(
  'below HTTP: GOAWAY on the stream, reset, hang, refused connection, untrusted certificate',
  async (t) => {
    // The default time for an answer: a refused stream is sent again only within it, and a
    // loaded machine can take the 300 ms the hang below waits before the refusal is read.
    const s = await setup(t);
    const hangs = s.another({ timeoutMs: 300 });

    const goaway = await rejection(s.provider.send(push(fakeDeviceToken('goaway'))));
    t.equal(goaway.kind, 'transient');
    t.match(goaway.message, /refused the stream \(GOAWAY Shutdown\)/);
    t.equal(
      s.fake.received.length,
      2,
      'a refused stream was never processed, so it is sent once more on a new connection',
    );
    t.equal(s.fake.received[1]!.session, 2);

    const reset = await rejection(s.provider.send(push(fakeDeviceToken('reset'))));
    t.equal(reset.kind, 'transient');
    t.match(reset.message, /closed before an answer \(code 2\)/);
    t.equal(s.fake.received.length, 3, 'a reset stream may have been processed: not resent');

    const started = Date.now();
    const hang = await rejection(hangs.send(push(fakeDeviceToken('hang'))));
    t.equal(hang.kind, 'transient');
    t.match(hang.message, /no answer within \d+ ms/);
    t.ok(Date.now() - started < 2_000, 'gives up after timeoutMs');
    const sessions = s.fake.sessionsAccepted;
    await hangs.send(push(fakeDeviceToken('ok')));
    t.equal(s.fake.sessionsAccepted, sessions, 'a hung stream does not cost the connection');

    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const refused = createApnsProvider(
      { ...s.config, baseUrl: `https://127.0.0.1:${port}`, timeoutMs: 1_000 },
      recordingContext(),
    );
    const r = await rejection(refused.send(push(fakeDeviceToken('ok'))));
    t.equal(r.kind, 'transient');
    t.match(r.message, /ECONNREFUSED/);
    await refused.close?.();

    const { ca: _ca, ...noCa } = s.config;
    const untrusted = createApnsProvider({ ...noCa, timeoutMs: 1_000 }, recordingContext());
    const u = await rejection(untrusted.send(push(fakeDeviceToken('ok'))));
    t.equal(u.kind, 'transient');
    t.match(u.message, /certificate/i, 'without the fake in `ca`, its certificate is not trusted');
    await untrusted.close?.();
  },
);

t.test("every APNs reason is classified, with Apple's reason in the message", async (t) => {
  const s = await setup(t);
  const expect: Record<ApnsReason, { kind: string; gone?: boolean; message?: RegExp }> = {
    BadCollapseId: { kind: 'permanent' },
    BadDeviceToken: { kind: 'permanent', gone: true },
    BadExpirationDate: { kind: 'permanent' },
    BadMessageId: { kind: 'permanent' },
    BadPriority: { kind: 'permanent' },
    BadTopic: { kind: 'permanent' },
    DeviceTokenNotForTopic: { kind: 'permanent' },
    DuplicateHeaders: { kind: 'permanent' },
    IdleTimeout: { kind: 'transient' },
    InvalidPushType: { kind: 'permanent' },
    MissingDeviceToken: { kind: 'permanent' },
    MissingTopic: { kind: 'permanent' },
    PayloadEmpty: { kind: 'permanent' },
    TopicDisallowed: { kind: 'permanent' },
    BadCertificate: { kind: 'transient' },
    BadCertificateEnvironment: { kind: 'transient' },
    ExpiredProviderToken: { kind: 'transient', message: /clock/ },
    Forbidden: { kind: 'transient' },
    InvalidProviderToken: { kind: 'transient', message: /check teamId, keyId and privateKey/ },
    MissingProviderToken: { kind: 'transient' },
    BadPath: { kind: 'permanent' },
    MethodNotAllowed: { kind: 'permanent' },
    ExpiredToken: {
      kind: 'permanent',
      gone: true,
      message: /no longer valid since 2025-02-28T12:00:00\.000Z/,
    },
    Unregistered: {
      kind: 'permanent',
      gone: true,
      message: /no longer valid since 2025-02-28T12:00:00\.000Z/,
    },
    PayloadTooLarge: { kind: 'permanent' },
    TooManyProviderTokenUpdates: { kind: 'rate_limited' },
    TooManyRequests: { kind: 'rate_limited' },
    InternalServerError: { kind: 'transient' },
    ServiceUnavailable: { kind: 'transient' },
    Shutdown: { kind: 'transient' },
  };
  for (const [reason, want] of Object.entries(expect) as [
    ApnsReason,
    (typeof expect)[ApnsReason],
  ][]) {
    const e = await rejection(s.provider.send(push(fakeDeviceToken(reason))));
    const status = APNS_REASONS[reason];
    t.equal(e.kind, want.kind, `${status} ${reason} → ${want.kind}`);
    t.equal(e.deviceGone, want.gone ?? false, `${reason} deviceGone=${want.gone ?? false}`);
    t.match(
      e.message,
      want.message ?? new RegExp(`^apns ${status} ${reason}`),
      `${reason}: message names the reason`,
    );
    t.equal(e.retryAfterMs, undefined, 'APNs gives no Retry-After');
  }
});

t.test('the fake refuses malformed requests the way APNs does', async (t) => {
  const s = await setup(t);
  const cases: [Partial<ApnsConfig>, OutboundMessage, string][] = [
    [{ topic: 'com.not.ours' }, push(fakeDeviceToken('ok')), 'apns 400 TopicDisallowed'],
    [{}, push('abcd1234'), 'apns 400 BadDeviceToken'],
    [
      {},
      push(fakeDeviceToken('ok'), { content: { kind: 'rendered', body: 'x'.repeat(5000) } }),
      'apns 413 PayloadTooLarge',
    ],
  ];
  for (const [over, m, msg] of cases) {
    const e = await rejection(s.another(over).send(m));
    t.match(e.message, msg);
  }
  s.fake.answerNext('InternalServerError');
  const e = await rejection(s.provider.send(push(fakeDeviceToken('ok'))));
  t.equal(e.message, 'apns 500 InternalServerError');
  await s.provider.send(push(fakeDeviceToken('ok')));
  t.pass('answerNext applies once, then the token decides');
  s.fake.answerFor(fakeDeviceToken('ok', 9), 'Unregistered');
  t.ok(
    (await rejection(s.provider.send(push(fakeDeviceToken('ok', 9))))).deviceGone,
    'answerFor overrides one token',
  );
});

t.test('checkCredentials', async (t) => {
  const s = await setup(t);
  await t.resolves(s.provider.checkCredentials!(), 'good key, key id, team and topic');
  t.equal(
    s.fake.received.at(-1)!.headers['apns-push-type'],
    'background',
    'probes with a silent push',
  );

  const k = await rejection(
    s.another({ privateKey: generateApnsKey().privateKey }).checkCredentials!(),
  );
  t.equal(k.kind, 'transient');
  t.match(k.message, /^apns 403 InvalidProviderToken/);
  t.match(
    (await rejection(s.another({ keyId: 'OTHERKEY99' }).checkCredentials!())).message,
    /InvalidProviderToken/,
  );
  t.match(
    (await rejection(s.another({ teamId: 'OTHERTEAM9' }).checkCredentials!())).message,
    /InvalidProviderToken/,
  );

  const w = await rejection(s.another({ topic: 'com.not.ours' }).checkCredentials!());
  t.equal(w.kind, 'permanent');
  t.match(w.message, /TopicDisallowed: topic com\.not\.ours is not an app of team TEAM123456/);
});

t.test('configuration', async (t) => {
  const { config, fake } = await startFakeApns();
  t.teardown(() => fake.stop());
  const check = (c: unknown) => checkConfig('@ens/plugin-apns', plugin, c);
  const full = check({
    teamId: 'TEAM123456',
    keyId: 'KEY1234567',
    privateKey: config.privateKey,
    topic: 'com.example.app',
  }) as ApnsConfig;
  t.equal(full.environment, 'production');
  t.equal(full.timeoutMs, 10_000);
  t.equal(full.pushType, 'alert');
  t.equal(full.expiration, 86_400);
  t.throws(() => check({ ...config, teamId: 'team' }), /config \/teamId/);
  t.throws(
    () => check({ ...config, baseUrl: 'http://127.0.0.1:1' }),
    /config \/baseUrl/,
    'APNs is https only',
  );
  t.throws(() => check({ ...config, privateKey: 'secret' }), /config \/privateKey/);
  t.throws(() => check({ ...config, priority: 7 }), /config \/priority/);
  t.throws(() => check({ ...config, handsetDelay: 1 }), /handsetDelay/);
  t.throws(() => check({ ...config, apps: { x: { topic: 'a', extra: 1 } } }), /config \/apps/);
  const rsa = generateKeyPairSync('rsa', {
    modulusLength: 1024,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  t.throws(
    () => createApnsProvider({ ...config, privateKey: rsa.privateKey }, recordingContext()),
    /P-256/,
    'a key that is not P-256 stops the start',
  );
  t.throws(
    () =>
      createApnsProvider(
        { ...config, privateKey: '-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----' },
        recordingContext(),
      ),
    /not a readable PEM/,
  );
});

t.test('close() stops sends in flight and later ones', async (t) => {
  const s = await setup(t);
  const p: Provider = s.provider;
  const inflight = rejection(p.send(push(fakeDeviceToken('hang'))));
  await until(() => s.fake.received.length === 1);
  await p.close?.();
  await p.close?.();
  const e = await inflight;
  t.equal(e.kind, 'transient', 'the hung send fails at once, transient');
  const after = await rejection(p.send(push(fakeDeviceToken('ok'))));
  t.match(after.message, /closed/);
});

t.test('conformance kit', (t) =>
  conformanceTest(t, '@ens/plugin-apns', { default: plugin }, fixture),
);
