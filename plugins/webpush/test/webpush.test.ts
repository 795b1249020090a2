import t from 'tap';
import { createServer } from 'node:net';
import webpush from 'web-push';
import { checkConfig, classifyError, type OutboundMessage, type Provider } from '@ens/plugin-sdk';
import { conformanceTest, recordingContext, type TapLike } from '@ens/plugin-sdk/conformance';
import plugin from '../src/index.ts';
import fixture, { pushTo } from '../src/conformance.ts';
import type { WebPushConfig } from '../src/config-schema.ts';
import { retryAfterMs } from '@ens/plugin-sdk';
import { describeBody } from '../src/error-classes.ts';
import {
  FakePushService,
  MAX_BODY_OCTETS,
  type FakeSubscription,
} from '../src/testing/fake-push-service.ts';

const PKG = '@ens/plugin-webpush';
const fake = new FakePushService();
const base = await fake.start();
t.teardown(() => fake.stop());

const keys = webpush.generateVAPIDKeys();
const appKeys = webpush.generateVAPIDKeys();
const otherKeys = webpush.generateVAPIDKeys();

const baseConfig: WebPushConfig = {
  vapidSubject: 'mailto:ops@example.com',
  vapidPublicKey: keys.publicKey,
  vapidPrivateKey: keys.privateKey,
  allowHttpEndpoints: true,
};

/**
 * A provider made the way ENS makes it: config through the schema (defaults filled), then create.
 */
async function provider(
  over: Partial<WebPushConfig> = {},
  ctx = recordingContext(),
): Promise<Provider> {
  const config = checkConfig(PKG, plugin, { ...baseConfig, ...over });
  return plugin.create(config as WebPushConfig, ctx);
}

/** The part of a tap test object failure() uses. */
interface Tap {
  ok(value: unknown, message: string): unknown;
  fail(message: string): unknown;
}

/** Sends expecting a refusal; returns how the error classifies (kind 'resolved' when none came). */
async function failure(t: Tap, p: Provider, m: OutboundMessage) {
  try {
    const r = await p.send(m);
    t.fail(`send resolved with ${JSON.stringify(r)} where a refusal was expected`);
    return { kind: 'resolved', message: '', retryAfterMs: undefined, deviceGone: false };
  } catch (e) {
    t.ok(
      e !== null && typeof e === 'object' && 'ensErrorKind' in e,
      'the error is a classified ProviderError',
    );
    return classifyError(e);
  }
}

const subscribe = (key: string | null = keys.publicKey): FakeSubscription => fake.subscribe(key);

t.test(
  'an accepted push: the decrypted payload is what was sent, with VAPID, TTL and Urgency headers',
  async (t) => {
    const p = await provider();
    const sub = subscribe();
    const before = Math.floor(Date.now() / 1000);
    const msg = pushTo(sub, {
      deliveryId: '0190a0b0-0000-7000-8000-000000000101',
      eventType: 'order.shipped',
      reference: 'order-42',
      content: {
        kind: 'rendered',
        subject: 'Your order shipped',
        body: 'Parcel 42 is on its way — ünïcødé ✓',
        data: { order: '42', url: '/orders/42' },
      },
    });
    const r = await p.send(msg);
    const [rec] = fake.receivedFor(sub.id);
    t.ok(rec, 'the push service received the message');
    if (!rec) return;
    t.equal(rec.status, 201);
    t.equal(
      r.providerMessageId,
      rec.location,
      'the provider message id is the Location (push message resource)',
    );
    t.match(r.providerMessageId, new RegExp(`^${base}/message/[A-Za-z0-9_-]+$`));
    t.equal(rec.decryptError, null, 'the fake decrypted the body with the subscription keys');
    t.same(
      JSON.parse(rec.plaintext ?? 'null'),
      {
        title: 'Your order shipped',
        body: 'Parcel 42 is on its way — ünïcødé ✓',
        data: { order: '42', url: '/orders/42' },
        delivery_id: '0190a0b0-0000-7000-8000-000000000101',
        event_type: 'order.shipped',
        reference: 'order-42',
      },
      'the service worker gets exactly the documented payload',
    );
    t.equal(rec.headers['content-encoding'], 'aes128gcm');
    t.equal(rec.headers['content-type'], 'application/octet-stream');
    t.equal(rec.ttl, '86400', 'TTL defaults to one day');
    t.equal(rec.urgency, 'normal', 'Urgency defaults to normal');
    t.match(String(rec.headers.authorization), /^vapid t=[\w-]+\.[\w-]+\.[\w-]+, k=[\w-]+$/);
    t.ok(rec.vapid, 'the VAPID header parsed');
    if (!rec.vapid) return;
    t.equal(rec.vapid.jwtHeader.alg, 'ES256');
    t.equal(rec.vapid.publicKey, keys.publicKey, 'k is the configured public key');
    t.equal(rec.vapid.claims.aud, base, 'aud is the push service origin');
    t.equal(rec.vapid.claims.sub, 'mailto:ops@example.com');
    const exp = Number(rec.vapid.claims.exp);
    t.ok(
      exp > before && exp <= before + 24 * 3600 + 5,
      `exp (${exp - before} s ahead) is within 24 h`,
    );
  },
);

t.test('ttlSeconds and urgency from the config reach the headers', async (t) => {
  const sub = subscribe();
  await (await provider({ ttlSeconds: 60, urgency: 'high' })).send(pushTo(sub));
  const zero = subscribe();
  await (await provider({ ttlSeconds: 0, urgency: 'very-low' })).send(pushTo(zero));
  t.match(fake.receivedFor(sub.id)[0], { ttl: '60', urgency: 'high', status: 201 });
  t.match(
    fake.receivedFor(zero.id)[0],
    { ttl: '0', urgency: 'very-low', status: 201 },
    'TTL 0 (deliver now or never) is sent as 0',
  );
});

t.test('a message without subject or data: no title, data {}', async (t) => {
  const sub = subscribe();
  await (await provider()).send(
    pushTo(sub, { content: { kind: 'rendered', body: 'just a body' } }),
  );
  const payload = JSON.parse(fake.receivedFor(sub.id)[0]?.plaintext ?? 'null');
  t.same(payload, {
    body: 'just a body',
    data: {},
    delivery_id: '0190a0b0-0000-7000-8000-0000000000aa',
    event_type: 'conformance.check',
    reference: null,
  });
  t.notOk('title' in payload);
});

t.test('Location: relative resolves against the endpoint; none gives a generated id', async (t) => {
  const p = await provider();
  const rel = subscribe();
  fake.setOutcome(rel.id, { status: 201, location: 'relative' });
  const r1 = await p.send(pushTo(rel));
  t.equal(r1.providerMessageId, `${base}${fake.receivedFor(rel.id)[0]?.location}`);
  const none = subscribe();
  fake.setOutcome(none.id, { status: 201, location: 'none' });
  const r2 = await p.send(pushTo(none));
  t.equal(fake.receivedFor(none.id)[0]?.location, null);
  t.match(r2.providerMessageId, /^webpush-[0-9a-f-]{36}$/);
});

t.test('VAPID: the subscription is bound to its applicationServerKey', async (t) => {
  const sub = subscribe();
  const wrong = await provider({
    vapidPublicKey: otherKeys.publicKey,
    vapidPrivateKey: otherKeys.privateKey,
  });
  const f = await failure(t, wrong, pushTo(sub));
  t.equal(fake.receivedFor(sub.id)[0]?.status, 403, 'the push service answered 403');
  t.equal(f.kind, 'transient', 'refused credentials are a configuration fault: transient');
  t.notOk(f.deviceGone);
  t.match(
    f.message,
    /^webpush 403: push service http:\/\/127\.0\.0\.1:\d+ refused the VAPID authorization of identity "default": errno 109: VAPID public key mismatch$/,
  );

  const open = subscribe(null);
  const r = await wrong.send(pushTo(open));
  t.ok(
    r.providerMessageId,
    'a subscription made without applicationServerKey takes any valid VAPID key',
  );

  const mixed = await provider({ vapidPrivateKey: otherKeys.privateKey });
  const sub2 = subscribe();
  const f2 = await failure(t, mixed, pushTo(sub2));
  t.equal(f2.kind, 'transient');
  t.match(
    f2.message,
    /webpush 403: .*the signature does not verify/,
    'a public key with the wrong private key: the signature fails',
  );
});

t.test('404 and 410: the device is gone', async (t) => {
  const p = await provider();
  const expired = subscribe();
  fake.setOutcome(expired.id, { status: 404 });
  const f404 = await failure(t, p, pushTo(expired));
  t.match(f404, { kind: 'permanent', deviceGone: true });
  t.match(
    f404.message,
    /^webpush 404: .*no longer knows this subscription.*errno 102: Invalid token$/,
  );

  const unsub = subscribe();
  fake.unsubscribe(unsub.id);
  const f410 = await failure(t, p, pushTo(unsub));
  t.equal(fake.receivedFor(unsub.id)[0]?.status, 410);
  t.match(f410, { kind: 'permanent', deviceGone: true });
  t.match(
    f410.message,
    /^webpush 410: the subscription is gone .*errno 106: No such subscription$/,
  );

  const unknown = pushTo(subscribe());
  const ep = `${base}/push/neverSubscribed`;
  const f = await failure(t, p, {
    ...unknown,
    device: {
      token: 'x',
      platform: 'webpush',
      subscription: { endpoint: ep, keys: unknown.device!.subscription!.keys },
    },
  });
  t.match(
    f,
    { kind: 'permanent', deviceGone: true },
    'an endpoint the service never issued is 404 too',
  );
});

t.test(
  '413: permanent with the push service reason; a payload over 4096 octets is refused by the ' +
    'service',
  async (t) => {
    const p = await provider();
    const knob = subscribe();
    fake.setOutcome(knob.id, { status: 413 });
    const f = await failure(t, p, pushTo(knob));
    t.match(f, { kind: 'permanent', deviceGone: false });
    t.match(
      f.message,
      /^webpush 413: .*too large \(\d+ octets encrypted\): errno 104: Data payload too large/,
    );

    const big = subscribe();
    const f2 = await failure(
      t,
      p,
      pushTo(big, { content: { kind: 'rendered', body: 'x'.repeat(MAX_BODY_OCTETS) } }),
    );
    t.equal(fake.receivedFor(big.id)[0]?.status, 413);
    t.match(f2, { kind: 'permanent' });
    t.match(
      f2.message,
      /webpush 413: .*errno 104: Data payload too large: \d+ octets, at most 4096/,
    );
  },
);

t.test('429: rate limited with the Retry-After hint (seconds or HTTP date)', async (t) => {
  const p = await provider();
  const secs = subscribe();
  fake.setOutcome(secs.id, { status: 429, retryAfter: '30' });
  const f = await failure(t, p, pushTo(secs));
  t.match(f, { kind: 'rate_limited', retryAfterMs: 30_000 });
  t.match(f.message, /^webpush 429: .*throttling: Too many requests/);

  const date = subscribe();
  fake.setOutcome(date.id, {
    status: 429,
    retryAfter: new Date(Date.now() + 60_000).toUTCString(),
  });
  const fd = await failure(t, p, pushTo(date));
  t.equal(fd.kind, 'rate_limited');
  t.ok(
    fd.retryAfterMs !== undefined && fd.retryAfterMs > 55_000 && fd.retryAfterMs <= 60_000,
    `an HTTP date becomes ${fd.retryAfterMs} ms`,
  );

  const none = subscribe();
  fake.setOutcome(none.id, { status: 429 });
  t.match(await failure(t, p, pushTo(none)), { kind: 'rate_limited', retryAfterMs: undefined });
});

t.test('5xx, a hung push service and an unreachable one are transient', async (t) => {
  const p = await provider({ timeoutMs: 300 });
  for (const status of [500, 502, 503] as const) {
    const sub = subscribe();
    fake.setOutcome(sub.id, { status });
    const f = await failure(t, p, pushTo(sub));
    t.match(f, { kind: 'transient', deviceGone: false }, `${status}`);
    t.match(f.message, new RegExp(`^webpush ${status}: push service .* failed: General error`));
  }

  const hung = subscribe();
  fake.setOutcome(hung.id, { status: 'hang' });
  const started = Date.now();
  const f = await failure(t, p, pushTo(hung));
  t.equal(f.kind, 'transient');
  t.match(f.message, /did not answer within 300 ms/);
  t.ok(Date.now() - started < 3_000, 'the deadline is timeoutMs, not a socket idle timer');
  t.equal(fake.receivedFor(hung.id).length, 1, 'the request did reach the service');

  // A port nobody listens on: take a free one and close it.
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
  const down = pushTo(subscribe());
  const sub = down.device!.subscription!;
  const fn = await failure(t, p, {
    ...down,
    device: {
      ...down.device!,
      subscription: { ...sub, endpoint: `http://127.0.0.1:${port}/push/x` },
    },
  });
  t.equal(fn.kind, 'transient');
  t.match(fn.message, /could not reach push service http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/);
});

t.test('sends that cannot go out are permanent and reach no push service', async (t) => {
  const p = await provider();
  const sub = subscribe();
  const m = pushTo(sub);
  const count = () => fake.received.length;
  const before = count();
  t.match(await failure(t, p, { ...m, device: undefined }), {
    kind: 'permanent',
    message: /carries no device/,
  });
  t.match(
    await failure(t, p, {
      ...m,
      device: { token: 'dev-1', platform: 'webpush', subscription: null },
    }),
    { kind: 'permanent', message: /device dev-1 has no push subscription/ },
  );
  t.match(
    await failure(t, p, { ...m, device: { token: 'fcm-1', platform: 'fcm', subscription: null } }),
    { kind: 'permanent', message: /fcm device, not webpush/ },
  );
  t.match(
    await failure(t, p, {
      ...m,
      device: {
        ...m.device!,
        subscription: {
          endpoint: sub.endpoint,
          keys: { p256dh: 'AAAA', auth: sub.json.keys.auth },
        },
      },
    }),
    {
      kind: 'permanent',
      message:
        /cannot encrypt to this subscription: The subscription p256dh value should be 65 bytes long/,
    },
  );
  const strict = await provider({ allowHttpEndpoints: false });
  t.match(await failure(t, strict, m), {
    kind: 'permanent',
    message: /has a http: endpoint; push services are https:/,
  });
  t.equal(count(), before, 'nothing was posted');
});

t.test('push_app selects the VAPID identity', async (t) => {
  const p = await provider({
    apps: {
      acme: {
        vapidSubject: 'https://acme.example/contact',
        vapidPublicKey: appKeys.publicKey,
        vapidPrivateKey: appKeys.privateKey,
      },
    },
  });
  const sub = subscribe(appKeys.publicKey);
  const r = await p.send(pushTo(sub, { tenant: 'acme', tenantSettings: { push_app: 'acme' } }));
  const rec = fake.receivedFor(sub.id)[0];
  t.equal(r.providerMessageId, rec?.location);
  t.equal(rec?.vapid?.publicKey, appKeys.publicKey, "k is the app's key");
  t.equal(rec?.vapid?.claims.sub, 'https://acme.example/contact', "sub is the app's subject");

  const f = await failure(t, p, pushTo(sub, { tenant: 'acme', tenantSettings: {} }));
  t.match(
    f,
    {
      kind: 'transient',
      message: /webpush 403: .*identity "default": errno 109: VAPID public key mismatch/,
    },
    'without push_app the default key is used, and this subscription refuses it',
  );

  const before = fake.received.length;
  const f2 = await failure(t, p, pushTo(sub, { tenantSettings: { push_app: 'globex' } }));
  t.match(f2, {
    kind: 'permanent',
    message:
      'webpush: tenant setting push_app "globex" names no configured VAPID app (configured: acme)',
  });
  t.equal(fake.received.length, before, 'nothing was posted for an unknown app');

  const single = await provider();
  const s2 = subscribe();
  await single.send(pushTo(s2, { tenantSettings: { push_app: 'for-fcm-only' } }));
  t.equal(
    fake.receivedFor(s2.id)[0]?.vapid?.publicKey,
    keys.publicKey,
    'with no apps configured, push_app (shared with FCM/APNs) leaves the default identity',
  );
});

t.test('checkCredentials checks each identity locally, without logging secrets', async (t) => {
  const ctx = recordingContext();
  await (
    await provider(
      {
        apps: {
          acme: {
            vapidSubject: 'mailto:a@acme.example',
            vapidPublicKey: appKeys.publicKey,
            vapidPrivateKey: appKeys.privateKey,
          },
        },
      },
      ctx,
    )
  ).checkCredentials!();
  const logged = JSON.stringify(ctx.logs);
  t.notOk(
    logged.includes(keys.privateKey) || logged.includes(appKeys.privateKey),
    'no private key in the logs',
  );
  const mixed = await provider({
    apps: {
      acme: {
        vapidSubject: 'mailto:a@acme.example',
        vapidPublicKey: appKeys.publicKey,
        vapidPrivateKey: otherKeys.privateKey,
      },
    },
  });
  await t.rejects(mixed.checkCredentials!(), {
    ensErrorKind: 'transient',
    message: /acme: vapidPublicKey is not the public half of vapidPrivateKey/,
  });
});

t.test('config schema', async (t) => {
  const full = checkConfig(PKG, plugin, {
    vapidSubject: 'mailto:x@example.com',
    vapidPublicKey: keys.publicKey,
    vapidPrivateKey: keys.privateKey,
  });
  t.same(
    full,
    {
      vapidSubject: 'mailto:x@example.com',
      vapidPublicKey: keys.publicKey,
      vapidPrivateKey: keys.privateKey,
      ttlSeconds: 86_400,
      urgency: 'normal',
      contentEncoding: 'aes128gcm',
      timeoutMs: 10_000,
      allowHttpEndpoints: false,
    },
    'defaults are filled in',
  );
  const refuses = (over: Record<string, unknown>, field: RegExp, why: string) =>
    t.throws(() => checkConfig(PKG, plugin, { ...baseConfig, ...over }), { message: field }, why);
  refuses(
    { vapidSubject: 'http://example.com' },
    /config \/vapidSubject/,
    'subject must be mailto: or https:',
  );
  refuses(
    { vapidPublicKey: keys.publicKey.slice(1) },
    /config \/vapidPublicKey/,
    'public key must be 65 octets base64url',
  );
  refuses(
    { vapidPrivateKey: `${keys.privateKey}=` },
    /config \/vapidPrivateKey/,
    'private key must be 32 octets base64url',
  );
  refuses({ urgency: 'urgent' }, /config \/urgency/, 'urgency is one of four');
  refuses({ contentEncoding: 'aesgcm' }, /config \/contentEncoding/, 'only aes128gcm');
  refuses(
    { apps: { a: { vapidSubject: 'mailto:a@b', vapidPublicKey: keys.publicKey } } },
    /config \/apps\/a/,
    'an app needs all three fields',
  );
  refuses(
    { ttl: 5 },
    /config \/ttl is not a setting this plugin knows/,
    'unknown settings stop the start',
  );
});

t.test('the fake push service enforces the protocol it stands in for', async (t) => {
  const sub = subscribe();
  const vapid = {
    subject: 'mailto:ops@example.com',
    publicKey: keys.publicKey,
    privateKey: keys.privateKey,
  };
  const request = (
    over: { headers?: Record<string, string | undefined>; audience?: string } = {},
  ) => {
    const d = webpush.generateRequestDetails(sub.json, '{"x":1}', {
      vapidDetails: vapid,
      contentEncoding: 'aes128gcm',
      TTL: 30,
    });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...d.headers, ...over.headers }))
      if (v !== undefined && k !== 'Content-Length') headers[k] = String(v);
    if (over.audience)
      headers.Authorization = webpush.getVapidHeaders(
        over.audience,
        vapid.subject,
        vapid.publicKey,
        vapid.privateKey,
        'aes128gcm',
      ).Authorization;
    return fetch(sub.endpoint, { method: 'POST', headers, body: d.body });
  };
  const expect = async (
    res: Promise<Response>,
    status: number,
    errno: number | null,
    why: string,
  ) => {
    const r = await res;
    const body = (await r.json()) as { code: number; errno: number | null; more_info: string };
    t.match(
      { status: r.status, ...body },
      { status, code: status, errno, more_info: /autopush/ },
      why,
    );
  };
  await expect(
    request({ headers: { Authorization: undefined } }),
    401,
    109,
    'no VAPID authorization: 401',
  );
  await expect(
    request({ headers: { Authorization: 'WebPush abc' } }),
    401,
    109,
    'another scheme: 401',
  );
  await expect(
    request({ audience: 'https://push.example.net' }),
    403,
    109,
    'aud of another origin: 403',
  );
  await expect(request({ headers: { TTL: undefined } }), 400, 111, 'no TTL: 400');
  await expect(
    request({ headers: { 'Content-Encoding': 'aesgcm' } }),
    400,
    110,
    'not aes128gcm: 400',
  );
  await expect(request({ headers: { Urgency: 'asap' } }), 400, null, 'unknown Urgency: 400');
  const ok = await request();
  t.equal(ok.status, 201, 'the unmodified request is accepted');
  t.equal(ok.headers.get('ttl'), '30', 'the kept TTL is echoed');
  t.equal(fake.receivedFor(sub.id).at(-1)?.plaintext, '{"x":1}');
});

t.test('helpers: Retry-After and push service reasons', async (t) => {
  t.equal(retryAfterMs('120'), 120_000);
  t.equal(
    retryAfterMs('Wed, 21 Oct 2015 07:28:00 GMT', Date.parse('Wed, 21 Oct 2015 07:27:00 GMT')),
    60_000,
  );
  t.equal(
    retryAfterMs('Wed, 21 Oct 2015 07:28:00 GMT', Date.parse('Wed, 21 Oct 2015 08:00:00 GMT')),
    0,
    'a date in the past: now',
  );
  t.equal(retryAfterMs('soon'), undefined);
  t.equal(retryAfterMs(null), undefined);
  t.equal(describeBody('{"reason":"BadJwtToken"}'), 'BadJwtToken', "Apple's shape");
  t.equal(
    describeBody('{"code":410,"errno":106,"error":"Gone","message":"No such subscription"}'),
    'errno 106: No such subscription',
    "Mozilla's shape",
  );
  t.equal(describeBody('  <html>\n  expired </html> '), '<html> expired </html>');
  t.equal(describeBody(''), '(no body)');
  t.equal(
    describeBody('x'.repeat(400)).length,
    100,
    'a body from a client-chosen address is cut to a short excerpt',
  );
  t.equal(
    describeBody('line\u0000one\r\nINJECTED: yes'),
    'line one INJECTED: yes',
    'control characters do not reach last_error or the logs',
  );
});

t.test('conformance kit', async (t) => {
  // tap 21 types ok()'s message and extra as one tuple, which the kit's TapLike does not match.
  const tapLike: TapLike = {
    ok: (value, message, extra) => t.ok(value, message ?? '', { ...extra }),
  };
  await conformanceTest(tapLike, PKG, await import('../src/index.ts'), fixture);
});
