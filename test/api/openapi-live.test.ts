import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import t, { type Test } from 'tap';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { signDeliveryToken } from '@ens/core';
import { uniqueKey, type TestClient } from '../harness/service.ts';
import { startDocumentedService, WHATSAPP } from './openapi-fixture.ts';

/**
 * The OpenAPI document against the live server: for every operation, each documented response
 * status is produced by a real request, and the answer's body and documented headers validate
 * against what the document says of that status. Every documented status must be reached here,
 * so the document lists nothing the server never gives; a status the server gives that the
 * document lacks fails the lookup. Every example of POST /v2/messages is posted and accepted.
 */

const root = path.resolve(import.meta.dirname, '../..');
const MAX_BODY = 64 * 1024;
const TOKEN_RATE = 60;
const UNSUBSCRIBE_RATE = 30;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

interface Request {
  token?: string;
  headers?: Record<string, string>;
  /** Sent as JSON unless `raw` is given. */
  json?: unknown;
  raw?: string;
  /** A loopback address to send from (the token endpoint counts per address). */
  from?: string;
}

type Doc = {
  paths: Record<
    string,
    Record<
      string,
      { operationId: string; responses: Record<string, DocResponse>; requestBody?: any }
    >
  >;
  [k: string]: any;
};
type DocResponse = {
  description: string;
  headers?: Record<string, { schema: any }>;
  content?: Record<string, { schema: any }>;
};

/** A request sent from a given loopback address (Linux routes all of 127/8 to lo). */
function sendFrom(
  url: string,
  from: string,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers, localAddress: from }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers))
          if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve({ status: res.statusCode ?? 0, headers: h, text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

t.test('every documented response, live', async (t) => {
  const svc = await startDocumentedService(t, {
    ENS_MAX_BODY_BYTES: String(MAX_BODY),
    ENS_TOKEN_RATE_LIMIT: String(TOKEN_RATE),
    ENS_UNSUBSCRIBE_RATE_LIMIT: String(UNSUBSCRIBE_RATE),
  });
  const doc = (await (await fetch(`${svc.baseUrl}/docs/json`)).json()) as Doc;

  const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
  const compiled = new Map<unknown, ValidateFunction>();
  const validator = (schema: object) => {
    let v = compiled.get(schema);
    if (!v) {
      v = ajv.compile(schema);
      compiled.set(schema, v);
    }
    return v;
  };

  const send = async (method: string, url: string, r: Request = {}): Promise<Answer> => {
    const headers: Record<string, string> = { ...r.headers };
    if (r.token) headers.authorization = `Bearer ${r.token}`;
    let body = r.raw;
    if (r.json !== undefined) {
      body = JSON.stringify(r.json);
      headers['content-type'] ??= 'application/json';
    }
    if (r.from) return sendFrom(svc.baseUrl + url, r.from, method, headers, body);
    const res = await fetch(svc.baseUrl + url, { method, headers, body });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };

  /** Which documented operation a concrete request is. */
  const operationOf = (method: string, url: string): string => {
    const pathname = url.split('?')[0]!;
    for (const p of Object.keys(doc.paths)) {
      const re = new RegExp(
        `^${p.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`,
      );
      if (re.test(pathname) && doc.paths[p]![method.toLowerCase()])
        return `${method.toLowerCase()} ${p}`;
    }
    throw new Error(`${method} ${url} is not a documented operation`);
  };

  const reached = new Set<string>();
  /** Makes the request, expects `status`, and holds the answer to the document. */
  const expect = async (
    t: Test,
    status: number,
    method: string,
    url: string,
    r: Request = {},
  ): Promise<Answer> => {
    const a = await send(method, url, r);
    const op = operationOf(method, url);
    const [m, p] = op.split(' ') as [string, string];
    const responses = doc.paths[p]![m]!.responses;
    const key = responses[String(status)] ? String(status) : `${String(status)[0]}XX`;
    const documented = responses[key];
    const what = `${op} → ${a.status} (${a.text.slice(0, 160)})`;
    t.equal(a.status, status, what);
    if (a.status !== status || !documented) {
      t.ok(documented, `${op} documents ${a.status}`);
      return a;
    }
    reached.add(`${op} ${key}`);
    if (!documented.content) {
      t.equal(a.text, '', `${op} ${status} has no body`);
    } else {
      const essence = (a.headers.get('content-type') ?? '').split(';')[0]!.trim();
      const media = documented.content[essence] ?? documented.content['*/*'];
      t.ok(media, `${op} ${status}: ${essence} is a documented content type`);
      if (media) {
        const value = essence === 'application/json' ? JSON.parse(a.text) : a.text;
        const v = validator(media.schema);
        t.ok(
          v(value),
          `${op} ${status} body matches the document${v.errors ? `: ${ajv.errorsText(v.errors)}` : ''}`,
        );
      }
    }
    for (const [name, h] of Object.entries(documented.headers ?? {})) {
      if (name === 'Idempotent-Replayed') continue; // present on replays only, checked there
      const value = a.headers.get(name);
      t.ok(value !== null, `${op} ${status} has the ${name} header`);
      if (value !== null)
        t.ok(
          validator(h.schema)(h.schema.type === 'integer' ? Number(value) : value),
          `${op} ${status} ${name}: ${value}`,
        );
    }
    return a;
  };

  const tokenForm = (c: TestClient) =>
    new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: c.clientId,
      client_secret: c.clientSecret,
    }).toString();
  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
  const BIG_HEADER = { 'x-padding': 'a'.repeat(20_000) };
  const sms = (tenant: string, body = 'hello') => ({
    tenant,
    event_type: 'openapi.test',
    messages: [
      { channel: 'sms', recipients: ['+15551230001'], content: { kind: 'rendered', body } },
    ],
  });
  const oversized = { tenant: 'acme', name: 'x'.repeat(MAX_BODY) };

  // No callback secret: the examples' callback_url (a public name) is never posted to.
  const client = await svc.createClient({ callbackSecret: false });
  const token = await client.token();
  await svc.tenant(client, 'acme');

  t.test('the document itself', async (t) => {
    const rootPackage = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      version: string;
    };
    t.equal(doc.info.version, rootPackage.version, 'info.version is the package version');
    t.equal(doc.info.license?.identifier, 'Apache-2.0');
    t.same(doc.servers, [{ url: '/', description: 'The ENS serving this document' }]);
    const ids = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops).map((o) => o.operationId),
    );
    t.ok(ids.every(Boolean), 'every operation has an operationId');
    t.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    const send = doc.paths['/v2/messages']!.post!;
    const key = (send as any).parameters.find(
      (p: { name: string }) => p.name === 'idempotency-key',
    );
    t.equal(key?.in, 'header');
    t.equal(key?.required, true, 'Idempotency-Key is required');
    const token = doc.paths['/v1/oauth2/token/']!.post! as any;
    t.same(token.security, [], 'no token is needed to get one');
    t.ok(
      token.requestBody?.content?.['application/x-www-form-urlencoded']?.schema,
      'the token request body is documented',
    );
    for (const p of ['/healthz', '/readyz', '/metrics', '/webhooks/whatsapp/webhook'])
      t.ok(doc.paths[p], `${p} is listed`);
  });

  t.test('every example of POST /v2/messages is accepted', async (t) => {
    const examples = doc.paths['/v2/messages']!.post!.requestBody.content['application/json']
      .examples as Record<string, { value: any }>;
    t.same(Object.keys(examples).sort(), ['email', 'push', 'sms', 'whatsapp']);
    for (const [name, ex] of Object.entries(examples)) {
      t.same(
        ex.value.messages.map((m: { channel: string }) => m.channel),
        [name],
        `the ${name} example sends on ${name} only`,
      );
      await expect(t, 202, 'POST', '/v2/messages', {
        token,
        json: ex.value,
        headers: { 'idempotency-key': uniqueKey(`example-${name}`) },
      });
    }
  });

  t.test('POST /v1/oauth2/token/', async (t) => {
    await expect(t, 200, 'POST', '/v1/oauth2/token/', { raw: tokenForm(client), headers: FORM });
    await expect(t, 400, 'POST', '/v1/oauth2/token/', {
      json: { grant_type: 'client_credentials' },
    });
    await expect(t, 401, 'POST', '/v1/oauth2/token/', {
      raw: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: client.clientId,
        client_secret: 'wrong',
      }).toString(),
      headers: FORM,
    });
    await expect(t, 413, 'POST', '/v1/oauth2/token/', {
      raw: `grant_type=client_credentials&pad=${'a'.repeat(MAX_BODY)}`,
      headers: FORM,
    });
    await expect(t, 431, 'POST', '/v1/oauth2/token/', {
      raw: tokenForm(client),
      headers: { ...FORM, ...BIG_HEADER },
    });
    // Every request counts against its address's allowance, before credentials are checked.
    const from = '127.0.0.77';
    for (let i = 0; i < TOKEN_RATE; i++)
      await send('POST', '/v1/oauth2/token/', { raw: 'grant_type=none', headers: FORM, from });
    await expect(t, 429, 'POST', '/v1/oauth2/token/', {
      raw: tokenForm(client),
      headers: FORM,
      from,
    });
  });

  t.test('POST /v2/messages', async (t) => {
    const key = uniqueKey('live');
    await expect(t, 202, 'POST', '/v2/messages', {
      token,
      json: sms('acme'),
      headers: { 'idempotency-key': key },
    });
    const replay = await expect(t, 202, 'POST', '/v2/messages', {
      token,
      json: sms('acme'),
      headers: { 'idempotency-key': key },
    });
    t.equal(replay.headers.get('idempotent-replayed'), 'true', 'a replay says so');
    await expect(t, 422, 'POST', '/v2/messages', {
      token,
      json: sms('acme', 'another body'),
      headers: { 'idempotency-key': key },
    });
    await expect(t, 400, 'POST', '/v2/messages', { token, json: sms('acme') });
    await expect(t, 400, 'POST', '/v2/messages', {
      token,
      json: { tenant: 'acme' },
      headers: { 'idempotency-key': uniqueKey() },
    });
    await expect(t, 413, 'POST', '/v2/messages', {
      token,
      json: sms('acme', 'x'.repeat(MAX_BODY)),
      headers: { 'idempotency-key': uniqueKey() },
    });
    await expect(t, 415, 'POST', '/v2/messages', {
      token,
      raw: 'hello',
      headers: { 'content-type': 'text/plain', 'idempotency-key': uniqueKey() },
    });
  });

  t.test('GET /v2/deliveries', async (t) => {
    await expect(t, 200, 'GET', '/v2/deliveries?limit=5', { token });
    await expect(t, 400, 'GET', '/v2/deliveries?limit=0', { token });
  });

  t.test('tenants', async (t) => {
    await expect(t, 201, 'POST', '/v2/tenants', {
      token,
      json: { tenant: 'globex', name: 'Globex' },
    });
    await expect(t, 200, 'POST', '/v2/tenants', { token, json: { tenant: 'globex' } });
    await expect(t, 400, 'POST', '/v2/tenants', { token, json: {} });
    await expect(t, 413, 'POST', '/v2/tenants', { token, json: oversized });
    await expect(t, 415, 'POST', '/v2/tenants', {
      token,
      raw: 'globex',
      headers: { 'content-type': 'text/plain' },
    });
    await expect(t, 200, 'GET', '/v2/tenants?limit=10', { token });
    await expect(t, 400, 'GET', '/v2/tenants?limit=0', { token });
    await expect(t, 200, 'GET', '/v2/tenants/globex', { token });
    await expect(t, 400, 'GET', '/v2/tenants/a%20b', { token });
    await expect(t, 404, 'GET', '/v2/tenants/nowhere', { token });
    await expect(t, 200, 'PATCH', '/v2/tenants/globex', { token, json: { name: 'Globex Corp' } });
    await expect(t, 400, 'PATCH', '/v2/tenants/globex', { token, json: {} });
    await expect(t, 404, 'PATCH', '/v2/tenants/nowhere', { token, json: { name: 'x' } });
    await expect(t, 413, 'PATCH', '/v2/tenants/globex', {
      token,
      json: { name: 'x'.repeat(MAX_BODY) },
    });
    await expect(t, 415, 'PATCH', '/v2/tenants/globex', {
      token,
      raw: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    await expect(t, 409, 'DELETE', '/v2/tenants/acme', { token });
    await expect(t, 400, 'DELETE', '/v2/tenants/a%20b', { token });
    await expect(t, 404, 'DELETE', '/v2/tenants/nowhere', { token });
    await expect(t, 204, 'DELETE', '/v2/tenants/globex', { token });
  });

  t.test('devices', async (t) => {
    const devices = '/v2/tenants/acme/users/user-7/devices';
    await expect(t, 201, 'PUT', `${devices}/fcm-token-1`, { token });
    await expect(t, 200, 'PUT', `${devices}/fcm-token-1`, { token });
    await expect(t, 400, 'PUT', `${devices}/not-hex`, { token, json: { platform: 'apns' } });
    await expect(t, 404, 'PUT', '/v2/tenants/nowhere/users/user-7/devices/fcm-token-1', { token });
    await expect(t, 413, 'PUT', `${devices}/fcm-token-2`, {
      token,
      json: { pad: 'x'.repeat(MAX_BODY) },
    });
    await expect(t, 415, 'PUT', `${devices}/fcm-token-2`, {
      token,
      raw: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    await expect(t, 200, 'GET', devices, { token });
    await expect(t, 400, 'GET', '/v2/tenants/acme/users/a%20b/devices', { token });
    await expect(t, 404, 'GET', '/v2/tenants/nowhere/users/user-7/devices', { token });
    await expect(t, 204, 'DELETE', `${devices}/fcm-token-1`, { token });
    await expect(t, 400, 'DELETE', '/v2/tenants/acme/users/a%20b/devices/x', { token });
    await expect(t, 404, 'DELETE', `${devices}/fcm-token-1`, { token });
    const full = '/v2/tenants/acme/users/user-full/devices';
    for (let i = 0; i < 100; i++) {
      const r = await send('PUT', `${full}/fcm-${i}`, { token });
      if (r.status !== 201) t.fail(`device ${i}: ${r.status} ${r.text}`);
    }
    await expect(t, 409, 'PUT', `${full}/fcm-100`, { token });
  });

  t.test('suppressions', async (t) => {
    const list = '/v2/tenants/acme/suppressions';
    await expect(t, 201, 'PUT', `${list}/sms/%2B15551230042`, {
      token,
      json: { reason: 'hard_bounce', detail: '21211 invalid To' },
    });
    await expect(t, 200, 'PUT', `${list}/sms/%2B15551230042`, {
      token,
      json: { reason: 'hard_bounce', detail: 'again' },
    });
    await expect(t, 201, 'PUT', `${list}/email/ann%40example.com`, { token });
    await expect(t, 400, 'PUT', `${list}/sms/not-a-phone`, { token });
    await expect(t, 400, 'PUT', `${list}/sms/%2B15551230043`, {
      token,
      json: { scope: 'two words' },
    });
    await expect(t, 404, 'PUT', '/v2/tenants/nowhere/suppressions/sms/%2B15551230043', { token });
    await expect(t, 409, 'PUT', `${list}/sms/%2B15551230042`, {
      token,
      json: { reason: 'soft_bounce' },
    });
    await expect(t, 413, 'PUT', `${list}/sms/%2B15551230043`, {
      token,
      json: { detail: 'x'.repeat(MAX_BODY) },
    });
    await expect(t, 415, 'PUT', `${list}/sms/%2B15551230043`, {
      token,
      raw: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    await expect(t, 200, 'GET', `${list}?limit=1`, { token });
    await expect(t, 200, 'GET', `${list}?channel=email&address=ANN%40example.com`, { token });
    await expect(t, 400, 'GET', `${list}?limit=1001`, { token });
    await expect(t, 404, 'GET', '/v2/tenants/nowhere/suppressions', { token });
    await expect(t, 200, 'GET', `${list}/sms/%2B15551230042`, { token });
    await expect(t, 400, 'GET', `${list}/fax/%2B15551230042`, { token });
    await expect(t, 404, 'GET', `${list}/sms/%2B15551230043`, { token });
    await expect(t, 204, 'DELETE', `${list}/email/ann%40example.com?scope=*`, { token });
    await expect(t, 400, 'DELETE', `${list}/email/ann%40example.com?scope=two%20words`, { token });
    await expect(t, 404, 'DELETE', `${list}/email/ann%40example.com`, { token });
  });

  /** A one-click unsubscribe link of a real email delivery (its row is there from the 202 on). */
  const accepted = await send('POST', '/v2/messages', {
    token,
    json: {
      tenant: 'acme',
      event_type: 'newsletter.weekly',
      messages: [
        {
          channel: 'email',
          recipients: ['reader@example.com'],
          content: { kind: 'rendered', subject: 'News', body: 'News' },
        },
      ],
    },
    headers: { 'idempotency-key': uniqueKey('unsubscribe') },
  });
  const unsubscribeLink = `/unsubscribe/${signDeliveryToken(svc.rt.consentKey, 'unsubscribe', JSON.parse(accepted.text).deliveries[0].delivery_id)}`;
  const ONE_CLICK = { raw: 'List-Unsubscribe=One-Click', headers: FORM };

  t.test('one-click unsubscribe', async (t) => {
    await expect(t, 200, 'GET', unsubscribeLink);
    await expect(t, 404, 'GET', `/unsubscribe/${'a'.repeat(42)}`);
    await expect(t, 431, 'GET', unsubscribeLink, { headers: BIG_HEADER });
    await expect(t, 200, 'POST', unsubscribeLink, ONE_CLICK);
    await expect(t, 404, 'POST', `/unsubscribe/${'a'.repeat(42)}`, ONE_CLICK);
    await expect(t, 413, 'POST', unsubscribeLink, {
      raw: `List-Unsubscribe=One-Click&pad=${'x'.repeat(20_000)}`,
      headers: FORM,
    });
    await expect(t, 431, 'POST', unsubscribeLink, {
      ...ONE_CLICK,
      headers: { ...FORM, ...BIG_HEADER },
    });
    const from = '127.0.0.79';
    for (let i = 0; i < UNSUBSCRIBE_RATE; i++) await send('GET', unsubscribeLink, { from });
    await expect(t, 429, 'GET', unsubscribeLink, { from });
    await expect(t, 429, 'POST', unsubscribeLink, { ...ONE_CLICK, from });
  });

  /** One valid request per /v2/ operation, for the answers every one of them gives. */
  let spare = 0;
  const v2Requests = (tok: string): [string, string, Request][] => [
    [
      'POST',
      '/v2/messages',
      { token: tok, json: sms('acme'), headers: { 'idempotency-key': uniqueKey() } },
    ],
    ['GET', '/v2/deliveries', { token: tok }],
    ['POST', '/v2/tenants', { token: tok, json: { tenant: 'acme' } }],
    ['GET', '/v2/tenants', { token: tok }],
    ['GET', '/v2/tenants/acme', { token: tok }],
    ['PATCH', '/v2/tenants/acme', { token: tok, json: { name: 'Acme' } }],
    ['DELETE', `/v2/tenants/spare-${++spare}`, { token: tok }],
    ['PUT', '/v2/tenants/acme/users/user-8/devices/fcm-token-8', { token: tok }],
    ['GET', '/v2/tenants/acme/users/user-8/devices', { token: tok }],
    ['DELETE', '/v2/tenants/acme/users/user-8/devices/fcm-token-8', { token: tok }],
    ['GET', '/v2/tenants/acme/suppressions', { token: tok }],
    [
      'PUT',
      '/v2/tenants/acme/suppressions/sms/%2B15551230088',
      { token: tok, json: { reason: 'manual' } },
    ],
    ['GET', '/v2/tenants/acme/suppressions/sms/%2B15551230088', { token: tok }],
    ['DELETE', '/v2/tenants/acme/suppressions/sms/%2B15551230088', { token: tok }],
  ];

  t.test('what every /v2/ operation answers', async (t) => {
    for (const [method, url, r] of v2Requests(token)) {
      await expect(t, 401, method, url, { ...r, token: undefined });
      await expect(t, 401, method, url, { ...r, token: 'not-a-token' });
      await expect(t, 431, method, url, { ...r, headers: { ...r.headers, ...BIG_HEADER } });
    }
    // One request a second: the third of three back-to-back requests is over the limit.
    const slow = await svc.createClient({ callbackSecret: false });
    await svc.rt.clients.setLimits(slow.clientId, { rateLimit: 1 });
    const slowToken = await slow.token();
    for (const [method, url, r] of v2Requests(slowToken)) {
      await send(method, url, r);
      await send(method, url, r);
      await expect(t, 429, method, url, r);
    }
  });

  t.test('operations endpoints', async (t) => {
    await expect(t, 200, 'GET', '/healthz');
    await expect(t, 431, 'GET', '/healthz', { headers: BIG_HEADER });
    await expect(t, 200, 'GET', '/readyz');
    await expect(t, 431, 'GET', '/readyz', { headers: BIG_HEADER });
    await expect(t, 200, 'GET', '/metrics');
    await expect(t, 431, 'GET', '/metrics', { headers: BIG_HEADER });
  });

  t.test('provider webhooks', async (t) => {
    const hook = '/webhooks/whatsapp/webhook';
    await expect(
      t,
      200,
      'GET',
      `${hook}?hub.mode=subscribe&hub.verify_token=${WHATSAPP.verifyToken}&hub.challenge=42`,
    );
    await expect(
      t,
      403,
      'GET',
      `${hook}?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=42`,
    );
    const body = JSON.stringify({ object: 'page', entry: [] });
    const signature = `sha256=${createHmac('sha256', WHATSAPP.appSecret).update(body).digest('hex')}`;
    await expect(t, 200, 'POST', hook, {
      raw: body,
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature },
    });
    await expect(t, 401, 'POST', hook, {
      raw: body,
      headers: { 'content-type': 'application/json' },
    });
    await expect(t, 413, 'POST', hook, {
      raw: 'x'.repeat(1024 * 1024 + 1),
      headers: { 'content-type': 'application/json' },
    });
  });

  // Last: PostgreSQL goes away, and everything that reads it answers 503 with Retry-After.
  t.test('PostgreSQL away', async (t) => {
    await svc.engines.postgres.kill9();
    t.teardown(() => svc.engines.postgres.start());
    await expect(t, 503, 'POST', '/v1/oauth2/token/', {
      raw: tokenForm(client),
      headers: FORM,
      from: '127.0.0.78',
    });
    for (const [method, url, r] of v2Requests(token)) await expect(t, 503, method, url, r);
    await expect(t, 503, 'GET', unsubscribeLink, { from: '127.0.0.78' });
    await expect(t, 503, 'POST', unsubscribeLink, { ...ONE_CLICK, from: '127.0.0.78' });
    await expect(t, 503, 'GET', '/readyz');
  });

  t.test('every documented response was produced', async (t) => {
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) =>
      Object.entries(ops).flatMap(([m, op]) =>
        Object.keys(op.responses).map((s) => `${m} ${p} ${s}`),
      ),
    );
    t.same(
      documented.filter((d) => !reached.has(d)).sort(),
      [],
      'no documented status left unreached',
    );
  });
});
