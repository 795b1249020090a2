import t from 'tap';
import { startTestService } from '../../../test/harness/service.ts';
import { ConsoleBrowser, csrfOf, signInDirectly } from './console-session.ts';

/**
 * Who may see and do what, over HTTP against a running service, with sessions made directly in
 * the database (the sign-in itself is the browser tests' job).
 */
const svc = await startTestService(t, {
  env: {
    ENS_OPS_ISSUER: 'http://127.0.0.1:9/',
    ENS_OPS_CLIENT_ID: 'ens-console',
    ENS_OPS_CLIENT_SECRET: 'console-secret',
    ENS_OPS_SUPERUSERS: 'boss@example.com',
    ENS_OPS_SUPERUSER_GROUP: 'ens-admins',
    ENS_OPS_CONTACT: 'the platform team (#platform)',
  },
  roles: ['api'],
});
const rt = svc.rt;
const target = await rt.clients.create('target', false);

const PAGES = [
  '/ops/',
  '/ops/deliveries',
  '/ops/clients',
  `/ops/clients/${target.client_id}`,
  '/ops/suppressions',
  `/ops/suppressions/remove?client=${target.client_id}&tenant=t1&channel=sms&address=%2B15551230001`,
  '/ops/dead-letters',
  '/ops/alerts',
  '/ops/audit',
  '/ops/deliveries/00000000-0000-7000-8000-000000000000',
  '/ops/no-such-page',
];
const ACTIONS = [
  '/ops/clients',
  `/ops/clients/${target.client_id}/rotate-secret`,
  `/ops/clients/${target.client_id}/callback-secret`,
  `/ops/clients/${target.client_id}/disable`,
  `/ops/clients/${target.client_id}/limits`,
  `/ops/clients/${target.client_id}/schedule`,
  `/ops/clients/${target.client_id}/tenants/t1/weight`,
  `/ops/clients/${target.client_id}/consent`,
  '/ops/suppressions',
  '/ops/suppressions/remove',
  '/ops/dead-letters/00000000-0000-7000-8000-000000000000/replay',
  '/ops/dead-letters/replay-all',
  '/ops/alerts',
  '/ops/alerts/1/delete',
];

t.test('signed out: pages redirect to sign-in, actions and data are 401', async (t) => {
  const b = new ConsoleBrowser(svc.baseUrl);
  for (const p of PAGES) {
    const r = await b.get(p);
    t.equal(r.status, 302, `GET ${p}`);
    t.equal(r.headers.get('location'), `/ops/login?return_to=${encodeURIComponent(p)}`);
  }
  t.equal((await b.get('/ops/api/summary')).status, 401, 'GET /ops/api/summary');
  for (const p of ACTIONS) t.equal((await b.post(p, { name: 'x' })).status, 401, `POST ${p}`);
  t.equal((await b.post('/ops/logout', {})).status, 401, 'POST /ops/logout');
  const signedOut = await b.get('/ops/signed-out');
  t.equal(signedOut.status, 200);
  t.match(signedOut.text, /You are signed out/);
  t.match(signedOut.text, /href="\/ops\/login"/);
  const css = await b.get('/ops/assets/console.css');
  t.equal(css.status, 200);
  t.match(css.headers.get('content-type'), /text\/css/);
  t.equal((await b.get('/ops/assets/console.js')).status, 200);
});

t.test('a signed-in non-superuser gets the notice or 403 everywhere', async (t) => {
  const b = new ConsoleBrowser(svc.baseUrl);
  await signInDirectly(rt, b, { subject: 'sub-ann', email: 'ann@example.com', groups: ['staff'] });
  for (const p of PAGES) {
    const r = await b.get(p);
    t.equal(r.status, 403, `GET ${p}`);
    t.match(r.text, /<h1>You don(&#39;|')t have access to the ENS console<\/h1>/);
    t.match(r.text, /<span id="whoami">ann@example.com<\/span>/);
    t.match(r.text, /<p id="contact">[^<]*the platform team \(#platform\)/);
    t.notMatch(r.text, /<nav/, 'no navigation');
    t.match(r.text, /<form method="post" action="\/ops\/logout"[\s\S]*Sign out<\/button>/);
  }
  const api = await b.get('/ops/api/summary');
  t.equal(api.status, 403);
  t.notMatch(api.text, /deliveries/, 'no numbers leak');
  // Even with a valid CSRF token (taken from the notice page's sign-out form), every action is
  // refused.
  const token = csrfOf((await b.get('/ops/')).text);
  const before = (await rt.db.query('SELECT count(*)::int AS n FROM clients')).rows[0].n;
  for (const p of ACTIONS)
    t.equal(
      (await b.post(p, { _csrf: token, name: 'sneaky', client_id: target.client_id })).status,
      403,
      `POST ${p}`,
    );
  t.equal(
    (await rt.db.query('SELECT count(*)::int AS n FROM clients')).rows[0].n,
    before,
    'no client was created',
  );
  t.equal((await rt.clients.get(target.client_id))!.disabled, false, 'the client was not disabled');
  // They can sign out.
  const out = await b.post('/ops/logout', { _csrf: token });
  t.equal(out.status, 302);
  t.equal(out.headers.get('location'), '/ops/signed-out');
});

t.test('superuser by allow-list, group, or grant', async (t) => {
  for (const who of [
    { subject: 'sub-boss', email: 'Boss@Example.com' },
    { subject: 'sub-grp', email: 'grp@example.com', groups: ['ens-admins'] },
  ]) {
    const b = new ConsoleBrowser(svc.baseUrl);
    await signInDirectly(rt, b, who);
    const r = await b.get('/ops/');
    t.equal(r.status, 200, who.email);
    t.match(r.text, /<h1>Dashboard<\/h1>/);
  }
  // A grant made before the first sign-in applies at it.
  const { StaffStore } = await import('../src/staff/staff-store.ts');
  await new StaffStore(rt.db).grant('Carol@Example.com', 'test');
  const c = new ConsoleBrowser(svc.baseUrl);
  const { staff } = await signInDirectly(rt, c, {
    subject: 'sub-carol',
    email: 'carol@example.com',
  });
  t.equal(staff.granted, true, 'the waiting grant was applied');
  t.equal((await c.get('/ops/')).status, 200);
  // Revoking takes effect on the next request.
  await new StaffStore(rt.db).revoke('carol@example.com');
  t.equal((await c.get('/ops/')).status, 403, 'revoked: the notice again');
});

t.test('superuser pages carry the landmarks', async (t) => {
  const b = new ConsoleBrowser(svc.baseUrl);
  await signInDirectly(rt, b, { subject: 'sub-boss', email: 'boss@example.com' });
  for (const p of [
    '/ops/',
    '/ops/deliveries',
    '/ops/clients',
    `/ops/clients/${target.client_id}`,
    '/ops/suppressions',
    `/ops/suppressions?client=${target.client_id}`,
    '/ops/dead-letters',
    '/ops/alerts',
    '/ops/audit',
  ]) {
    const r = await b.get(p);
    t.equal(r.status, 200, p);
    t.equal(r.headers.get('cache-control'), 'no-store');
    t.match(r.headers.get('content-security-policy'), /script-src 'self'/);
    t.match(r.text, /<a class="skip-link" href="#main">Skip to content<\/a>/);
    t.match(r.text, /<span id="whoami">boss@example.com<\/span>/);
    t.match(
      r.text,
      /<nav aria-label="Console">[\s\S]*>Dashboard<[\s\S]*>Deliveries<[\s\S]*>Clients<[\s\S]*>Suppressions<[\s\S]*>Dead letters<[\s\S]*>Alerts<[\s\S]*>Audit log<[\s\S]*<\/nav>/,
    );
    t.match(r.text, /<main id="main"/);
    t.equal((r.text.match(/<h1[ >]/g) ?? []).length, 1, 'one h1');
    for (const input of r.text.matchAll(/<input id="([^"]+)"/g))
      t.match(r.text, new RegExp(`<label for="${input[1]}">`), `label for ${input[1]}`);
    for (const form of r.text.matchAll(/<form method="post"[\s\S]*?<\/form>/g))
      t.match(form[0], /name="_csrf" value="[^"]+"/, 'every form has a CSRF token');
  }
  const summary = await b.get('/ops/api/summary');
  t.equal(summary.status, 200);
  t.match(JSON.parse(summary.text), {
    deliveries: { last_hour: { sms: { pending: Number } } },
    callbacks: { backlog: Number, dead_letters: Number },
  });
});

t.test('CSRF: a POST without a valid token changes nothing', async (t) => {
  const b = new ConsoleBrowser(svc.baseUrl);
  await signInDirectly(rt, b, { subject: 'sub-boss', email: 'boss@example.com' });
  await b.get('/ops/clients'); // the csrf cookie
  const count = async () =>
    (await rt.db.query(`SELECT count(*)::int AS n FROM clients WHERE name = 'csrf-victim'`)).rows[0]
      .n;
  const none = await b.post('/ops/clients', { name: 'csrf-victim' });
  t.equal(none.status, 403, 'no token');
  t.match(none.text, /This form could not be accepted/);
  t.notMatch(none.text, /at .*\.ts:\d+/, 'no stack trace');
  t.equal(
    (await b.post('/ops/clients', { name: 'csrf-victim', _csrf: 'forged' })).status,
    403,
    'forged token',
  );
  // A token minted for another session does not pass in this one.
  const other = new ConsoleBrowser(svc.baseUrl);
  await signInDirectly(rt, other, { subject: 'sub-boss2', email: 'boss@example.com' });
  const foreign = csrfOf((await other.get('/ops/clients')).text);
  t.equal(
    (await b.post('/ops/clients', { name: 'csrf-victim', _csrf: foreign })).status,
    403,
    'token of another session',
  );
  t.equal((await b.post(`/ops/clients/${target.client_id}/disable`, {})).status, 403);
  t.equal(await count(), 0);
  t.equal((await rt.clients.get(target.client_id))!.disabled, false);
});

t.test('sessions expire on the server and end at sign-out', async (t) => {
  const b = new ConsoleBrowser(svc.baseUrl);
  const { token } = await signInDirectly(rt, b, { subject: 'sub-boss', email: 'boss@example.com' });
  t.equal((await b.get('/ops/')).status, 200);
  const { sessionId } = await import('../src/session-store.ts');
  await rt.db.query(
    `UPDATE ops_sessions SET expires_at = now() - interval '1 second' WHERE id = $1`,
    [sessionId(token)],
  );
  const expired = await b.get('/ops/clients');
  t.equal(expired.status, 302, 'an expired session is no session');
  t.equal(expired.headers.get('location'), '/ops/login?return_to=%2Fops%2Fclients');

  const c = new ConsoleBrowser(svc.baseUrl);
  const s2 = await signInDirectly(rt, c, { subject: 'sub-boss', email: 'boss@example.com' });
  const page = await c.get('/ops/');
  const setCookie = page.headers.getSetCookie().join('\n');
  t.match(setCookie, /ens_ops_csrf=.*HttpOnly/i);
  t.match(setCookie, /SameSite=Lax/i);
  const out = await c.post('/ops/logout', { _csrf: csrfOf(page.text) });
  t.equal(out.status, 302);
  t.equal(out.headers.get('location'), '/ops/signed-out');
  t.equal(
    (
      await rt.db.query('SELECT count(*)::int AS n FROM ops_sessions WHERE id = $1', [
        sessionId(s2.token),
      ])
    ).rows[0].n,
    0,
    'the server-side session is gone',
  );
  t.notOk(c.cookies.has('ens_ops_session'), 'the cookie is cleared');
  // Replaying the old cookie does not bring the session back.
  c.cookies.set('ens_ops_session', b.cookies.get('ens_ops_session')!);
  t.equal((await c.get('/ops/')).status, 302);
  // A tampered cookie is refused.
  const d = new ConsoleBrowser(svc.baseUrl);
  await signInDirectly(rt, d, { subject: 'sub-boss', email: 'boss@example.com' });
  d.cookies.set(
    'ens_ops_session',
    d.cookies.get('ens_ops_session')!.replace(/^./, (ch) => (ch === 'A' ? 'B' : 'A')),
  );
  t.equal((await d.get('/ops/')).status, 302);
});

t.test('the audit log records sign-outs', async (t) => {
  const { rows } = await rt.db.query(
    `SELECT actor, action FROM audit_log WHERE action IN ('staff.sign_out') ORDER BY id`,
  );
  t.ok(
    rows.some((r) => r.actor === 'ann@example.com'),
    'the non-superuser sign-out',
  );
  t.ok(rows.some((r) => r.actor === 'boss@example.com'));
});
