import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { startTestService, type Teardown, type TestService } from '../harness/service.ts';

/**
 * The API under generated requests: valid ones built from the interface's shapes, and broken ones
 * (wrong types, NUL, lone surrogates, huge and deep values, odd content types, duplicated headers,
 * prototype keys) made by mutating them. The invariants, checked on every request:
 * - never a 5xx;
 * - every 4xx has a `detail` string;
 * - a rejected request writes no row and no file;
 * - an accepted handoff, tenant or suppression reads back exactly as sent;
 * - an unsubscribe link that does not work gets the one not-found page, whatever was sent.
 */

export interface FuzzRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  /** Header pairs; a name may repeat. */
  headers: [string, string][];
  body?: string;
  /** What an accepted request must read back as. */
  expect?: { kind: 'handoff' | 'tenant' | 'suppression'; sent: Record<string, unknown> };
}

export interface FuzzTarget {
  svc: TestService;
  token: string;
  tenant: string;
}

export async function startFuzzTarget(t: Teardown): Promise<FuzzTarget> {
  const svc = await startTestService(t, {
    env: {
      ENS_ALLOW_PRIVATE_CALLBACKS: 'false',
      ENS_MAX_IMAGE_BYTES: '4096',
      ENS_MAX_BODY_BYTES: String(512 * 1024),
      ENS_LOG_LEVEL: 'fatal',
    },
  });
  const client = await svc.createClient();
  await svc.tenant(client, 'fz');
  return { svc, token: await client.token(), tenant: 'fz' };
}

// ——— values ———

const hostileString = fc.oneof(
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    'x\ud800',
    '\udc00y',
    '\ud83d',
    'é\u0301',
    '\u2028',
    '\r\n',
    '\t',
    '    ',
    '\u00a0\u00a0\u00a0\u00a0',
    '',
    ' ',
    '%00',
    '../..',
    '<script>',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constant('a'.repeat(70_000)),
);
const nested = (depth: number): unknown => (depth === 0 ? 1 : { a: nested(depth - 1) });
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  hostileString,
  fc.constantFrom(null, 0, -1, 1e308, true, [], {}, [[[]]], nested(40), nested(5)),
  fc.jsonValue({ maxDepth: 3 }),
);

const phone = fc.integer({ min: 10_000_000, max: 999_999_999_999 }).map((n) => `+${n}`);
const email = fc.emailAddress();
const text = fc.string({ minLength: 1, maxLength: 40 });
const param = fc
  .string({ minLength: 1, maxLength: 20 })
  // biome-ignore lint/suspicious/noControlCharactersInRegex: what the API refuses in a parameter
  .filter((s) => !/[\u0000-\u001f\u007f-\u009f\u2028\u2029]|\s{4,}/.test(s));

const entry = fc.oneof(
  fc.record({
    channel: fc.constant('sms'),
    recipients: fc.array(phone, { minLength: 1, maxLength: 3 }),
    content: fc.record({ kind: fc.constant('rendered'), body: text }),
  }),
  fc.record({
    channel: fc.constant('email'),
    recipients: fc.array(email, { minLength: 1, maxLength: 2 }),
    content: fc.oneof(
      fc.record({
        kind: fc.constant('rendered'),
        body: text,
        subject: fc.string({ maxLength: 30 }),
      }),
      // Inline images are written to media storage: a refused request must leave none behind.
      fc.record({
        kind: fc.constant('rendered'),
        body: text,
        html: fc.constant('<img src="cid:i">'),
        inline_images: fc
          .tuple(fc.uint8Array({ minLength: 1, maxLength: 48 }))
          .map(([b]) => [
            { cid: 'i', media_type: 'image/png', data: Buffer.from(b).toString('base64') },
          ]),
      }),
    ),
  }),
  fc.record({
    channel: fc.constant('push'),
    recipients: fc.array(text, { minLength: 1, maxLength: 2 }),
    content: fc.record({
      kind: fc.constant('rendered'),
      body: text,
      data: fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 8 }), {
        maxKeys: 3,
      }),
    }),
  }),
  fc.record({
    channel: fc.constant('whatsapp'),
    recipients: fc.array(phone, { minLength: 1, maxLength: 2 }),
    content: fc.record({
      kind: fc.constant('template'),
      template_name: fc.constantFrom('order_shipped', 'otp'),
      language: fc.constantFrom('en', 'en_US'),
      body_params: fc.array(param, { maxLength: 3 }),
    }),
  }),
);

const handoff = (tenant: string) =>
  fc.record(
    // Now and then a tenant that is not provisioned: refused after the body was checked.
    {
      tenant: fc.constantFrom(tenant, tenant, tenant, 'not-provisioned'),
      event_type: text,
      reference: text,
      messages: fc.uniqueArray(entry, { minLength: 1, maxLength: 3, selector: (e) => e.channel }),
    },
    { requiredKeys: ['tenant', 'event_type', 'messages'] },
  );

/** Replaces (or adds) one value somewhere in the object, keys included. */
function mutate(value: unknown): fc.Arbitrary<unknown> {
  const paths: (string | number)[][] = [];
  const walk = (v: unknown, path: (string | number)[]) => {
    paths.push(path);
    if (v && typeof v === 'object')
      for (const [k, c] of Object.entries(v)) walk(c, [...path, Array.isArray(v) ? Number(k) : k]);
  };
  walk(value, []);
  return fc
    .tuple(fc.constantFrom(...paths), hostileValue, fc.constantFrom('replace', 'add-key', 'proto'))
    .map(([path, v, how]) => {
      const copy = structuredClone(value) as Record<string, unknown>;
      if (path.length === 0) return how === 'replace' ? v : copy;
      let at: any = copy;
      for (const k of path.slice(0, -1)) at = at[k];
      const last = path[path.length - 1]!;
      if (how === 'replace') at[last] = v;
      else if (how === 'add-key' && at && typeof at === 'object')
        at[typeof v === 'string' ? v : 'extra'] = v;
      else if (at && typeof at === 'object')
        Object.defineProperty(at, '__proto__', { value: { polluted: true }, enumerable: true });
      return copy;
    });
}

const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  '',
  'application/json, application/json',
);
const json = (v: unknown) => JSON.stringify(v) ?? 'null';
/**
 * A path segment for any string: a lone surrogate cannot be UTF-8, so it goes as the bytes a
 * careless client would send.
 */
const segment = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    return '%ED%A0%80';
  }
};
const rawSegment = fc.oneof(
  hostileString.map(segment),
  fc.constantFrom('%00', '%FF', '%ED%A0%80', '%C0%AF', '%2e%2e', '%'),
);

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
/*
 * Date-times as a caller might write them, most naming no real instant: 30 February, year 0, hour
 * 24, an offset of +23:59. Date.parse takes several of these and PostgreSQL refuses them (22008,
 * 22009), which answered 500; ENS must answer 400 for each and 200 for the real ones.
 */
const dateText = fc
  .tuple(
    fc.oneof(
      fc.constantFrom(0, 1, 1970, 2024, 2025, 2026, 9999),
      fc.integer({ min: 0, max: 9999 }),
    ),
    fc.integer({ min: 0, max: 13 }),
    fc.integer({ min: 0, max: 32 }),
    fc.integer({ min: 0, max: 24 }),
    fc.integer({ min: 0, max: 60 }),
    fc.constantFrom('Z', '+00:00', '+14:00', '-15:59', '+16:00', '+23:59', '+0530', '-00:60', ''),
    fc.constantFrom('', '.5', '.123456', '.0000000001'),
  )
  .map(
    ([y, mo, d, h, mi, zone, frac]) =>
      `${pad(y, 4)}-${pad(mo)}-${pad(d)}T${pad(h)}:${pad(mi)}:00${frac}${zone}`,
  );

export function requests(tenant: string): fc.Arbitrary<FuzzRequest> {
  const key = fc.oneof(fc.uuid(), hostileString.map(String), fc.constant(''));
  const messages = fc.oneof(
    // A few keys come back with other bodies: refused (422) after the body was checked.
    {
      weight: 2,
      arbitrary: fc
        .tuple(
          handoff(tenant),
          fc.oneof(
            { weight: 4, arbitrary: fc.uuid() },
            { weight: 1, arbitrary: fc.constantFrom('reused-1', 'reused-2') },
          ),
        )
        .map(
          ([h, k]): FuzzRequest => ({
            method: 'POST',
            path: '/v2/messages',
            headers: [
              ['content-type', 'application/json'],
              ['idempotency-key', k],
            ],
            body: json(h),
            expect: { kind: 'handoff', sent: h },
          }),
        ),
    },
    {
      weight: 5,
      arbitrary: handoff(tenant)
        .chain((h) => fc.tuple(mutate(h), key, contentType))
        .map(
          ([b, k, ct]): FuzzRequest => ({
            method: 'POST',
            path: '/v2/messages',
            headers: [
              ['content-type', ct],
              ['idempotency-key', k],
            ],
            body: json(b),
          }),
        ),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(handoff(tenant), fc.uuid(), fc.uuid()).map(
        ([h, k1, k2]): FuzzRequest => ({
          method: 'POST',
          path: '/v2/messages',
          headers: [
            ['content-type', 'application/json'],
            ['idempotency-key', k1],
            ['idempotency-key', k2],
          ],
          body: json(h),
        }),
      ),
    },
    {
      weight: 1,
      arbitrary: fc.string({ unit: 'binary', maxLength: 200 }).map(
        (raw): FuzzRequest => ({
          method: 'POST',
          path: '/v2/messages',
          headers: [
            ['content-type', 'application/json'],
            ['idempotency-key', randomUUID()],
          ],
          body: raw,
        }),
      ),
    },
  );
  const tenantBody = fc.record(
    {
      tenant: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
      name: text,
      settings: fc.dictionary(
        fc.string({ minLength: 1, maxLength: 10 }),
        fc.jsonValue({ maxDepth: 2 }),
        { maxKeys: 4 },
      ),
    },
    { requiredKeys: ['tenant'] },
  );
  const tenants = fc.oneof(
    tenantBody.map(
      (b): FuzzRequest => ({
        method: 'POST',
        path: '/v2/tenants',
        headers: [['content-type', 'application/json']],
        body: json(b),
        expect: { kind: 'tenant', sent: b },
      }),
    ),
    tenantBody.chain(mutate).map(
      (b): FuzzRequest => ({
        method: 'POST',
        path: '/v2/tenants',
        headers: [['content-type', 'application/json']],
        body: json(b),
      }),
    ),
    fc.tuple(rawSegment, mutate({ name: 'n', settings: { sender_id: 'ACME' } })).map(
      ([tn, b]): FuzzRequest => ({
        method: 'PATCH',
        path: `/v2/tenants/${tn}`,
        headers: [['content-type', 'application/json']],
        body: json(b),
      }),
    ),
    rawSegment.map(
      (tn): FuzzRequest => ({ method: 'GET', path: `/v2/tenants/${tn}`, headers: [] }),
    ),
  );
  const devices = fc
    .tuple(
      rawSegment,
      rawSegment,
      mutate({
        platform: 'webpush',
        subscription: {
          endpoint: 'https://push.example.com/x',
          keys: {
            p256dh:
              'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM',
            auth: 'tBHItJI5svbpez7KI4CCXg',
          },
        },
      }),
    )
    .map(
      ([user, token, b]): FuzzRequest => ({
        method: 'PUT',
        path: `/v2/tenants/${tenant}/users/${user || 'u'}/devices/${token || 't'}`,
        headers: [['content-type', 'application/json']],
        body: json(b),
      }),
    );
  const feed = fc
    .dictionary(
      fc.constantFrom('reference', 'updated_since', 'cursor', 'limit', 'tenant', 'status', 'x'),
      rawSegment,
      { maxKeys: 3 },
    )
    .map(
      (q): FuzzRequest => ({
        method: 'GET',
        path: `/v2/deliveries?${Object.entries(q)
          .map(([k, v]) => `${k}=${v}`)
          .join('&')}`,
        headers: [],
      }),
    );
  // The same dates as updated_since and inside a cursor shaped like the feed's own.
  const feedDates = fc
    .tuple(dateText, fc.boolean(), fc.option(rawSegment, { nil: undefined }))
    .map(([d, inCursor, reference]): FuzzRequest => {
      const cursor = Buffer.from(JSON.stringify({ u: d })).toString('base64url');
      const q = inCursor ? `cursor=${cursor}` : `updated_since=${encodeURIComponent(d)}`;
      return {
        method: 'GET',
        path: `/v2/deliveries?${q}${reference === undefined ? '' : `&reference=${reference}`}`,
        headers: [],
      };
    });
  const token = fc
    .tuple(
      fc.dictionary(
        fc.constantFrom('grant_type', 'client_id', 'client_secret', 'scope'),
        rawSegment,
        { maxKeys: 4 },
      ),
      contentType,
    )
    .map(
      ([f, ct]): FuzzRequest => ({
        method: 'POST',
        path: '/v1/oauth2/token/',
        headers: [['content-type', ct]],
        body: Object.entries(f)
          .map(([k, v]) => `${k}=${v}`)
          .join('&'),
      }),
    );
  const suppressionBody = fc.record(
    {
      reason: fc.constantFrom('manual', 'hard_bounce', 'complaint', 'opt_out', 'invalid_recipient'),
      scope: fc.constantFrom('*', 'newsletter.weekly', 'promo'),
      detail: fc.string({ maxLength: 60 }),
    },
    { requiredKeys: [] },
  );
  const suppressionAddress = fc.oneof(
    fc.tuple(fc.constantFrom('sms', 'whatsapp'), phone.map(segment)),
    fc.tuple(fc.constant('email'), email.map(segment)),
    fc.tuple(fc.constantFrom('sms', 'email', 'push', 'whatsapp', 'fax', '%00'), rawSegment),
  );
  const suppressions = fc.oneof(
    fc.tuple(suppressionAddress, suppressionBody).map(
      ([[ch, addr], b]): FuzzRequest => ({
        method: 'PUT',
        path: `/v2/tenants/${tenant}/suppressions/${ch}/${addr || 'x'}`,
        headers: [['content-type', 'application/json']],
        body: json(b),
        expect: {
          kind: 'suppression',
          sent: { ...b, path: `/v2/tenants/${tenant}/suppressions/${ch}/${addr || 'x'}` },
        },
      }),
    ),
    fc.tuple(suppressionAddress, suppressionBody.chain(mutate), contentType).map(
      ([[ch, addr], b, ct]): FuzzRequest => ({
        method: 'PUT',
        path: `/v2/tenants/${tenant}/suppressions/${ch}/${addr || 'x'}`,
        headers: [['content-type', ct]],
        body: json(b),
      }),
    ),
    fc.tuple(suppressionAddress, fc.option(rawSegment)).map(
      ([[ch, addr], scope]): FuzzRequest => ({
        method: 'DELETE',
        path: `/v2/tenants/${tenant}/suppressions/${ch}/${addr || 'x'}${scope === null ? '' : `?scope=${scope}`}`,
        headers: [],
      }),
    ),
    suppressionAddress.map(
      ([ch, addr]): FuzzRequest => ({
        method: 'GET',
        path: `/v2/tenants/${tenant}/suppressions/${ch}/${addr || 'x'}`,
        headers: [],
      }),
    ),
    fc
      .dictionary(
        fc.constantFrom('channel', 'reason', 'address', 'cursor', 'limit', 'x'),
        rawSegment,
        { maxKeys: 4 },
      )
      .map(
        (q): FuzzRequest => ({
          method: 'GET',
          path: `/v2/tenants/${tenant}/suppressions?${Object.entries(q)
            .map(([k, v]) => `${k}=${v}`)
            .join('&')}`,
          headers: [],
        }),
      ),
  );
  // No link here works (the fuzz sends no email): every answer must be the one not-found page.
  const unsubscribe = fc
    .tuple(
      fc.constantFrom('GET', 'POST') as fc.Arbitrary<'GET' | 'POST'>,
      fc.oneof(rawSegment, fc.stringMatching(/^[a-z2-7]{42}$/)),
      fc.string({ unit: 'binary', maxLength: 100 }),
      contentType,
    )
    .map(
      ([method, token, raw, ct]): FuzzRequest => ({
        method,
        path: `/unsubscribe/${token || 'x'}`,
        headers: [['content-type', ct]],
        body: raw,
      }),
    );
  const webhooks = fc
    .tuple(
      fc.constantFrom('/webhooks/sandbox/x', '/webhooks/twilio/status', '/webhooks/%00'),
      fc.string({ unit: 'binary', maxLength: 100 }),
      contentType,
    )
    .map(
      ([path, raw, ct]): FuzzRequest => ({
        method: 'POST',
        path,
        headers: [['content-type', ct]],
        body: raw,
      }),
    );
  return fc.oneof(
    { weight: 6, arbitrary: messages },
    { weight: 3, arbitrary: tenants },
    { weight: 2, arbitrary: devices },
    { weight: 2, arbitrary: feed },
    { weight: 1, arbitrary: feedDates },
    { weight: 1, arbitrary: token },
    { weight: 1, arbitrary: webhooks },
    { weight: 3, arbitrary: suppressions },
    { weight: 1, arbitrary: unsubscribe },
  );
}

// ——— the invariants ———

async function countFiles(dir: string): Promise<number> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  let n = 0;
  for (const e of entries) n += e.isDirectory() ? await countFiles(join(dir, e.name)) : 1;
  return n;
}

async function snapshot(target: FuzzTarget): Promise<string> {
  const { rows } = await target.svc.rt.db.query(
    `SELECT (SELECT count(*) FROM handoffs) h, (SELECT count(*) FROM deliveries) d, (SELECT count(*) FROM tenants) t,
            (SELECT count(*) FROM devices) dv, (SELECT count(*) FROM idempotency_keys) k, (SELECT count(*) FROM callbacks) c,
            (SELECT count(*) FROM suppressions) s`,
  );
  return `${JSON.stringify(rows[0])} files=${await countFiles(join(target.svc.config.dataDir, 'media'))}`;
}

/**
 * What fetch will not put in a header value: control characters (HTAB aside) and anything past
 * Latin-1.
 */
const UNFETCHABLE = /[^\t\u0020-\u007e\u0080-\u00ff]/;

/** The request written by hand on a socket, as a client that ignores the rules would. */
function rawRequest(
  target: FuzzTarget,
  req: FuzzRequest,
): Promise<{ status: number; text: string }> {
  const url = new URL(target.svc.baseUrl);
  const body =
    req.body !== undefined && req.method !== 'GET' ? Buffer.from(req.body) : Buffer.alloc(0);
  const head = [
    `${req.method} ${req.path} HTTP/1.1`,
    `host: ${url.host}`,
    `authorization: Bearer ${target.token}`,
    ...req.headers.map(([k, v]) => `${k}: ${v}`),
    `content-length: ${body.length}`,
    'connection: close',
  ];
  return new Promise((resolve, reject) => {
    // write, not end: a half-closed socket reads as a client that went away, and its answer is
    // lost.
    const socket = net.connect(Number(url.port), url.hostname, () =>
      socket.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'utf8'), body])),
    );
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const all = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(all)?.[1] ?? 0);
      if (status === 0) reject(new Error(`no answer: ${JSON.stringify(all.slice(0, 100))}`));
      else resolve({ status, text: all.slice(all.indexOf('\r\n\r\n') + 4) });
    });
  });
}

/** Sends one request and checks the invariants; resolves with what broke, or null. */
let previous = '';
/** The first unsubscribe 404 seen: every later one must be byte-identical to it. */
let notFoundPage: string | undefined;
export async function check(target: FuzzTarget, req: FuzzRequest): Promise<string | null> {
  const broken = await checkOne(target, req);
  const seen = `${req.method} ${req.path} ${JSON.stringify(req.headers)} ${(req.body ?? '').slice(0, 200)}`;
  const out = broken && process.env.FUZZ_DEBUG ? `${broken}\n  after: ${previous}` : broken;
  previous = seen;
  return out;
}

async function checkOne(target: FuzzTarget, req: FuzzRequest): Promise<string | null> {
  const before = await snapshot(target);
  let status: number;
  let text: string;
  try {
    if (req.headers.some(([, v]) => UNFETCHABLE.test(v))) {
      // fetch will not send such a header, but an attacker's client will (as UTF-8 bytes).
      ({ status, text } = await rawRequest(target, req));
    } else {
      const headers = new Headers({ authorization: `Bearer ${target.token}` });
      for (const [k, v] of req.headers)
        if (!(k === 'content-type' && v === '')) headers.append(k, v);
      const r = await fetch(target.svc.baseUrl + req.path, {
        method: req.method,
        headers,
        ...(req.body !== undefined && req.method !== 'GET' ? { body: req.body } : {}),
      });
      status = r.status;
      text = await r.text();
    }
  } catch (e) {
    return `the request failed at the transport: ${(e as Error).message}`;
  }
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (status >= 500) return `${status}: ${text.slice(0, 300)}`;
  // As fetch sends it: a token of dot segments (%2e%2e) leaves /unsubscribe/ before it is sent.
  const unsubscribe = new URL(req.path, target.svc.baseUrl).pathname.startsWith('/unsubscribe/');
  if (unsubscribe && status === 404) {
    notFoundPage ??= text;
    if (text !== notFoundPage)
      return `an unsubscribe 404 differs from the others: ${text.slice(0, 300)}`;
    if (req.method !== 'GET' && (await snapshot(target)) !== before)
      return 'a refused unsubscribe changed the record';
    return null;
  }
  if (unsubscribe && status < 400) return `an unsubscribe link that cannot work answered ${status}`;
  if (status >= 400) {
    if (typeof body?.detail !== 'string' || body.detail.length === 0)
      return `${status} without a detail: ${text.slice(0, 300)}`;
    if (req.method !== 'GET') {
      const after = await snapshot(target);
      if (after !== before)
        return `a rejected request (${status} ${body.detail}) changed ${before} to ${after}`;
    }
    return null;
  }
  if (req.expect?.kind === 'handoff' && status === 202) {
    const sent = req.expect.sent as { tenant: string; event_type: string; reference?: string };
    const { rows } = await target.svc.rt.db.query(
      'SELECT tenant, event_type, reference FROM handoffs WHERE id = $1',
      [body.handoff_id],
    );
    const stored = rows[0];
    if (
      !stored ||
      stored.tenant !== sent.tenant ||
      stored.event_type !== sent.event_type ||
      stored.reference !== (sent.reference ?? null)
    ) {
      return `the stored handoff ${JSON.stringify(stored)} differs from what was sent`;
    }
  }
  if (req.expect?.kind === 'tenant' && status === 201) {
    const sent = req.expect.sent as { tenant: string; name?: string; settings?: unknown };
    const r = await fetch(`${target.svc.baseUrl}/v2/tenants/${encodeURIComponent(sent.tenant)}`, {
      headers: { authorization: `Bearer ${target.token}` },
    });
    const got = (await r.json()) as { name: string | null; settings: unknown };
    // jsonb orders keys its own way: compare as values, not as text.
    if (
      got.name !== (sent.name ?? null) ||
      !isDeepStrictEqual(got.settings, JSON.parse(JSON.stringify(sent.settings ?? {})))
    ) {
      return `the tenant reads back as ${JSON.stringify(got).slice(0, 200)}, not as sent`;
    }
  }
  if (req.expect?.kind === 'suppression' && (status === 200 || status === 201)) {
    const sent = req.expect.sent as {
      path: string;
      reason?: string;
      scope?: string;
      detail?: string;
    };
    const r = await fetch(target.svc.baseUrl + sent.path, {
      headers: { authorization: `Bearer ${target.token}` },
    });
    const got = (
      (await r.json()) as {
        results?: { scope: string; reason: string; detail: string | null; source: string }[];
      }
    ).results?.find((e) => e.scope === (sent.scope ?? '*'));
    if (
      !got ||
      got.reason !== (sent.reason ?? 'manual') ||
      got.detail !== (sent.detail ?? null) ||
      got.source !== 'api'
    ) {
      return `the suppression reads back as ${JSON.stringify(got).slice(0, 200)}, not as sent`;
    }
  }
  return null;
}
