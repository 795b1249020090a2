import t, { type Test } from 'tap';
import { smsHandoff, startTestService, uniqueKey, type ApiResponse } from '../harness/service.ts';

/**
 * Hostile bytes in requests: NUL, lone surrogates, deep or huge values. Each is refused with a 4xx
 * whose `detail` names the field, and changes nothing. Found by probing the running service; every
 * case here answered 500 (or was stored altered) before it was fixed.
 */

const svc = await startTestService(t, { env: { ENS_MAX_BODY_BYTES: String(24 * 1024 * 1024) } });
const client = await svc.createClient();
await svc.tenant(client, 'acme');

const counts = async () =>
  (
    await svc.rt.db.query(
      `SELECT (SELECT count(*)::int FROM handoffs) AS handoffs, (SELECT count(*)::int FROM deliveries) AS deliveries,
              (SELECT count(*)::int FROM idempotency_keys) AS keys, (SELECT count(*)::int FROM tenants) AS tenants`,
    )
  ).rows[0];

/** A raw JSON text, so lone surrogates and NUL escapes reach the server exactly as written. */
const raw = (method: string, path: string, text: string, headers: Record<string, string> = {}) =>
  svc.request(method, path, {
    raw: text,
    headers: {
      authorization: `Bearer ${tokenValue}`,
      'content-type': 'application/json',
      'idempotency-key': uniqueKey(),
      ...headers,
    },
  });
const tokenValue = await client.token();

async function refused(
  t: Test,
  r: ApiResponse,
  status: number | number[],
  field?: RegExp,
): Promise<void> {
  const statuses = Array.isArray(status) ? status : [status];
  t.ok(
    statuses.includes(r.status),
    `answers ${statuses.join(' or ')} (got ${r.status}: ${r.text.slice(0, 200)})`,
  );
  t.type(r.body?.detail, 'string', 'with a detail');
  if (field) t.match(r.body?.detail ?? '', field, 'the detail names the field');
}

const handoffText = (over: {
  reference?: string;
  event_type?: string;
  tenant?: string;
  body?: string;
}) =>
  `{"tenant":${over.tenant ?? '"acme"'},"event_type":${over.event_type ?? '"x.y"'},${over.reference ? `"reference":${over.reference},` : ''}` +
  `"messages":[{"channel":"sms","recipients":["+15551230000"],"content":{"kind":"rendered","body":${over.body ?? '"hi"'}}}]}`;

t.test('NUL in a string field is a 400 naming the field, not a 500', async (t) => {
  const before = await counts();
  const cases: [string, string, RegExp][] = [
    ['reference', handoffText({ reference: '"a\\u0000b"' }), /reference/],
    ['event_type', handoffText({ event_type: '"a\\u0000b"' }), /event_type/],
    ['tenant', handoffText({ tenant: '"ac\\u0000me"' }), /tenant/],
    ['body', handoffText({ body: '"h\\u0000i"' }), /body/],
  ];
  for (const [name, text, field] of cases) {
    t.comment(name);
    await refused(t, await raw('POST', '/v2/messages', text), 400, field);
  }
  await refused(
    t,
    await raw('POST', '/v2/tenants', '{"tenant":"t1","name":"a\\u0000b"}'),
    400,
    /name/,
  );
  await refused(
    t,
    await raw('POST', '/v2/tenants', '{"tenant":"t2","settings":{"sender_id":"a\\u0000"}}'),
    400,
    /settings/,
  );
  for (const q of ['reference=a%00b', 'tenant=a%00b', 'cursor=a%00b']) {
    const r = await client.call('GET', `/v2/deliveries?${q}`);
    await refused(t, r, 400, new RegExp(q.split('=')[0]!));
  }
  const r = await client.call('GET', '/v2/tenants/a%00b');
  await refused(t, r, [400, 404]);
  t.same(await counts(), before, 'nothing was stored');
});

t.test('a lone surrogate is a 400, not stored as U+FFFD', async (t) => {
  const before = await counts();
  await refused(
    t,
    await raw('POST', '/v2/messages', handoffText({ reference: '"x\\ud800"' })),
    400,
    /reference/,
  );
  await refused(
    t,
    await raw('POST', '/v2/messages', handoffText({ body: '"x\\udc00y"' })),
    400,
    /body/,
  );
  await refused(
    t,
    await raw('POST', '/v2/tenants', '{"tenant":"t3","settings":{"x":"\\ud800"}}'),
    400,
    /settings/,
  );
  t.same(await counts(), before, 'nothing was stored');
});

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
const image = (bytes: number) =>
  Buffer.concat([PNG, Buffer.alloc(bytes - PNG.length, 1)]).toString('base64');
const emailWith = (data: string) => ({
  tenant: 'acme',
  event_type: 'x.y',
  messages: [
    {
      channel: 'email',
      recipients: ['a@example.com'],
      content: {
        kind: 'rendered',
        subject: 's',
        body: 'b',
        html: '<img src="cid:i1">',
        inline_images: [{ cid: 'i1', data }],
      },
    },
  ],
});

t.test('inline images up to the 5 MiB limit are accepted; one byte over is a 413', async (t) => {
  const limit = 5 * 1024 * 1024;
  const at = await client.call('POST', '/v2/messages', {
    body: emailWith(image(limit)),
    headers: { 'idempotency-key': uniqueKey() },
  });
  t.equal(at.status, 202, `exactly 5 MiB is accepted (got ${at.status}: ${at.text.slice(0, 200)})`);
  const under = await client.call('POST', '/v2/messages', {
    body: emailWith(image(4 * 1024 * 1024)),
    headers: { 'idempotency-key': uniqueKey() },
  });
  t.equal(
    under.status,
    202,
    `4 MiB is accepted (got ${under.status}: ${under.text.slice(0, 200)})`,
  );
  const before = await counts();
  const over = await client.call('POST', '/v2/messages', {
    body: emailWith(image(limit + 1)),
    headers: { 'idempotency-key': uniqueKey() },
  });
  await refused(t, over, 413, /inline_images/);
  t.same(await counts(), before, 'nothing was stored');
});

t.test('tenant settings are bounded in depth', async (t) => {
  const before = await counts();
  const deep = `${'{"a":'.repeat(4000)}1${'}'.repeat(4000)}`;
  await refused(
    t,
    await raw('POST', '/v2/tenants', `{"tenant":"deep","settings":${deep}}`),
    [400, 413],
    /settings/,
  );
  await refused(
    t,
    await raw(
      'POST',
      '/v2/tenants',
      JSON.stringify({ tenant: 'wide', settings: { note: 'x'.repeat(20_000) } }),
    ),
    400,
    /settings/,
  );
  await refused(
    t,
    await raw(
      'POST',
      '/v2/tenants',
      JSON.stringify({
        tenant: 'many',
        settings: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, 1])),
      }),
    ),
    400,
    /settings/,
  );
  t.same(await counts(), before, 'nothing was stored');
});

t.test('whatsapp body parameters Meta would refuse are refused at accept time', async (t) => {
  await svc.tenant(client, 'wa');
  const before = await counts();
  for (const param of [
    'a\rb',
    'a\u2028b',
    'a\u000bb',
    'a\u00a0\u00a0\u00a0\u00a0b',
    '',
    'a\nb',
    'a\tb',
    'a    b',
  ]) {
    const body = {
      tenant: 'wa',
      event_type: 'x.y',
      messages: [
        {
          channel: 'whatsapp',
          recipients: ['+15551230000'],
          content: {
            kind: 'template',
            template_name: 'order',
            language: 'en',
            body_params: [param],
          },
        },
      ],
    };
    const r = await client.call('POST', '/v2/messages', {
      body,
      headers: { 'idempotency-key': uniqueKey() },
    });
    await refused(t, r, 400, /body_params/);
  }
  t.same(await counts(), before, 'nothing was stored');
});

t.test('an sms body has a documented maximum', async (t) => {
  const before = await counts();
  const r = await client.call('POST', '/v2/messages', {
    body: {
      ...smsHandoff('acme', ['+15551230000']),
      messages: [
        {
          channel: 'sms',
          recipients: ['+15551230000'],
          content: { kind: 'rendered', body: 'x'.repeat(19 * 1024 * 1024) },
        },
      ],
    },
    headers: { 'idempotency-key': uniqueKey() },
  });
  await refused(t, r, [400, 413], /body/);
  t.same(await counts(), before, 'nothing was stored');
});

t.test('a __proto__ body gets a detail that says what is wrong', async (t) => {
  const r = await raw('POST', '/v2/messages', '{"__proto__":{"x":1},"tenant":"acme"}');
  await refused(t, r, 400, /__proto__/);
});

t.test('X-Request-Id is bounded in length and charset', async (t) => {
  const long = await client.call('GET', '/v2/tenants', {
    headers: { 'x-request-id': 'a'.repeat(5000) },
  });
  t.not(
    long.headers.get('x-request-id'),
    'a'.repeat(5000),
    'a 5,000-character request id is not echoed',
  );
  t.ok(
    (long.headers.get('x-request-id') ?? '').length <= 128,
    'the echoed id is at most 128 characters',
  );
  const odd = await client.call('GET', '/v2/tenants', {
    headers: { 'x-request-id': 'abc<script>' },
  });
  t.notMatch(
    odd.headers.get('x-request-id') ?? '',
    /[<>]/,
    'an id with markup characters is replaced',
  );
  const fine = await client.call('GET', '/v2/tenants', {
    headers: { 'x-request-id': 'req-123_ABC.4' },
  });
  t.equal(fine.headers.get('x-request-id'), 'req-123_ABC.4', 'a well-formed id is kept');
});

t.test('/docs has the same security headers as /ops/', async (t) => {
  const r = await svc.request('GET', '/docs/static/index.html');
  const r2 = r.status === 200 ? r : await svc.request('GET', '/docs');
  t.match(r2.headers.get('content-security-policy') ?? '', /default-src/, 'a CSP');
  t.match(r2.headers.get('x-frame-options') ?? '', /DENY/i, 'frames denied');
  t.equal(r2.headers.get('x-content-type-options'), 'nosniff');
});
