import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestService } from '../harness/service.ts';
import { ConsoleBrowser, signInDirectly } from '../../services/ops/test/console-session.ts';

/**
 * Dates PostgreSQL refuses (22008: a 30 February, year 0, a +23:59 offset) and a NUL byte, in every
 * place a date or a filter enters by URL: each is a 400 with a detail, never a 500 (issue 25).
 */

// The console needs an issuer that answers discovery; nobody signs in through it here.
const idp = createServer((req, res) => {
  const base = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
  if (req.url === '/.well-known/openid-configuration')
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        issuer: base,
        authorization_endpoint: `${base}/auth`,
        token_endpoint: `${base}/token`,
        jwks_uri: `${base}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      }),
    );
  else res.writeHead(404).end();
});
await new Promise<void>((r) => idp.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => idp.close(() => r())));

const svc = await startTestService(t, {
  roles: ['api'],
  env: {
    ENS_OPS_ISSUER: `http://127.0.0.1:${(idp.address() as AddressInfo).port}`,
    ENS_OPS_CLIENT_ID: 'ens-console',
    ENS_OPS_CLIENT_SECRET: 'console-secret',
    ENS_OPS_SUPERUSERS: 'boss@example.com',
  },
});
const client = await svc.createClient();
const staff = new ConsoleBrowser(svc.baseUrl);
await signInDirectly(svc.rt, staff, { subject: 'sub-boss', email: 'boss@example.com' });

const BAD_DATES = [
  '2026-02-30T00:00:00Z',
  '2025-02-29T00:00:00Z',
  '0000-01-01T00:00:00Z',
  '2026-01-01T00:00:00+23:59',
  '2026-01-01T24:00:00Z',
  '2026-13-01T00:00:00Z',
  '0001-01-01T00:00:00+01:00',
];
const cursorOf = (u: string) => Buffer.from(JSON.stringify({ u })).toString('base64url');

t.test(
  '/v2/deliveries refuses a date PostgreSQL cannot take, as updated_since or in a cursor',
  async (t) => {
    for (const d of BAD_DATES) {
      for (const q of [`updated_since=${encodeURIComponent(d)}`, `cursor=${cursorOf(d)}`]) {
        const r = await client.call('GET', `/v2/deliveries?${q}`);
        t.equal(r.status, 400, `${q} (${d})`);
        t.equal(r.body?.code, 'ENS_ERR_VALIDATION', q);
        t.type(r.body?.detail, 'string', q);
      }
    }
    const nul = await client.call('GET', '/v2/deliveries?reference=%00');
    t.equal(nul.status, 400, 'a NUL in a filter');
    t.equal(nul.body?.code, 'ENS_ERR_VALIDATION');
  },
);

t.test('/v2/deliveries still takes every date PostgreSQL takes', async (t) => {
  for (const d of [
    '2024-02-29T00:00:00Z',
    '2026-01-31T12:00:00.123456+00:00',
    '2026-01-01T00:00:00+14:00',
    '2026-01-01T00:00:00-0930',
    '0001-01-01T00:00:00Z',
    '9999-12-31T23:59:59Z',
  ]) {
    const r = await client.call('GET', `/v2/deliveries?updated_since=${encodeURIComponent(d)}`);
    t.equal(r.status, 200, d);
    const c = await client.call('GET', `/v2/deliveries?cursor=${cursorOf(d)}`);
    t.equal(c.status, 200, `cursor ${d}`);
  }
});

t.test('the console refuses the same with a 400 page, not a 500', async (t) => {
  const urls = [
    '/ops/deliveries?since=0000-01-01T00:00',
    '/ops/deliveries?until=2026-02-30T00:00',
    '/ops/deliveries?since=2026-01-01T00:00%2B23:59',
    '/ops/deliveries?reference=%00',
    '/ops/deliveries?recipient=a%00b',
    `/ops/clients?after=${encodeURIComponent('2026-02-30T00:00:00Z|x')}`,
    `/ops/clients?after=${encodeURIComponent('0000-01-01T00:00:00Z|x')}`,
    '/ops/dead-letters?after=2026-02-30T00:00:00Z%7Cx',
    '/ops/dead-letters?client=%00',
    '/ops/dead-letters?client=nope',
    '/ops/suppressions?client=%00',
    '/ops/audit?before=%00',
    '/ops/alerts?after=%00',
  ];
  for (const u of urls) {
    const r = await staff.get(u);
    t.ok(r.status === 400 || r.status === 200 || r.status === 404, `${u}: ${r.status}`);
    t.not(r.status, 500, u);
  }
  for (const u of urls.slice(0, 5)) t.equal((await staff.get(u)).status, 400, u);
  const ok = await staff.get(
    '/ops/deliveries?since=2024-02-29T00:00&until=2026-01-01T00:00%2B14:00',
  );
  t.equal(ok.status, 200, 'a leap day and a +14:00 offset are times');
});
