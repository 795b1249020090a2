import t from 'tap';
import { openPage, screenshot } from '../harness/browser.ts';
import { startReceiver } from '../harness/receiver.ts';
import { smsHandoff, waitFor } from '../harness/service.ts';
import {
  ALLOW_LISTED,
  CONTACT,
  csrfToken,
  heading,
  pageText,
  startConsole,
  submitAndWait,
  textOf,
} from './setup.ts';

/**
 * Who gets into the console at /ops/: a signed-out visitor is sent to the identity provider
 * (authorization code with PKCE); superusers (by IdP group or by the allow-list) get in; a
 * signed-in user without rights sees the access notice and is refused every page, action and data
 * endpoint, changing nothing; signing out ends the session on the server.
 */

const con = await startConsole(t);
const { svc, idp, ensUrl } = con;

const NOTICE = "You don't have access to the ENS console";
/** Every console page, with real ids filled in by the refusal test. */
const pagePaths = (ids: { deliveryId: string; clientId: string }) => [
  '/ops/',
  '/ops/deliveries',
  `/ops/deliveries/${ids.deliveryId}`,
  '/ops/clients',
  `/ops/clients/${ids.clientId}`,
  '/ops/suppressions',
  `/ops/suppressions?client=${ids.clientId}&tenant=shop`,
  `/ops/suppressions/remove?client=${ids.clientId}&tenant=shop&channel=sms&address=%2B15551230001&scope=*`,
  '/ops/dead-letters',
  `/ops/dead-letters?client=${ids.clientId}`,
  '/ops/alerts',
  '/ops/audit',
];

t.test(
  'a signed-out visitor is sent to the identity provider, and comes back where they started',
  async (t) => {
    // The server's first answers, hop by hop.
    const first = await fetch(`${ensUrl}/ops/clients`, { redirect: 'manual' });
    t.equal(first.status, 302, 'GET /ops/clients without a session → 302');
    const toLogin = new URL(first.headers.get('location') ?? '', ensUrl);
    t.equal(toLogin.origin + toLogin.pathname, `${ensUrl}/ops/login`, '… to /ops/login');
    t.equal(
      toLogin.searchParams.get('return_to'),
      '/ops/clients',
      '… with return_to the page asked for',
    );
    for (const [method, path] of [
      ['POST', '/ops/logout'],
      ['POST', '/ops/clients'],
      ['GET', '/ops/api/summary'],
    ] as const) {
      const r = await fetch(ensUrl + path, { method, redirect: 'manual' });
      t.equal(r.status, 401, `${method} ${path} without a session → 401`);
    }

    const discovery = (await (
      await fetch(`${idp.issuer}/.well-known/openid-configuration`)
    ).json()) as { authorization_endpoint: string };
    const { page, context } = await openPage(t, con.browser);
    const authRequests: URL[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.origin + u.pathname === discovery.authorization_endpoint) authRequests.push(u);
    });
    await page.goto(`${ensUrl}/ops/clients`);
    await page.waitForURL((u) => u.origin === idp.issuer);
    t.equal(authRequests.length, 1, 'the browser was sent to the authorization endpoint once');
    const auth = authRequests[0]!;
    const q = auth.searchParams;
    t.equal(
      auth.origin,
      new URL(idp.issuer).origin,
      "the IdP's origin (from ENS_OPS_ISSUER's discovery)",
    );
    t.equal(q.get('response_type'), 'code', 'response_type=code');
    t.equal(q.get('client_id'), idp.clientId, 'client_id from ENS_OPS_CLIENT_ID');
    t.equal(
      q.get('redirect_uri'),
      `${ensUrl}/ops/callback`,
      'redirect_uri is ENS_PUBLIC_URL + /ops/callback',
    );
    t.equal(q.get('code_challenge_method'), 'S256', 'PKCE with S256');
    t.match(
      q.get('code_challenge') ?? '',
      /^[A-Za-z0-9_-]{43}$/,
      'a SHA-256 code challenge (43 base64url characters)',
    );
    t.ok((q.get('state') ?? '').length >= 16, 'an unguessable state');
    t.ok((q.get('nonce') ?? '').length >= 16, 'a nonce');
    t.ok((q.get('scope') ?? '').split(' ').includes('openid'), 'scope includes openid');
    await screenshot(page, 'idp-sign-in');

    await idp.signIn(page, 'ada@example.com');
    const landed = new URL(page.url());
    t.equal(
      landed.origin + landed.pathname,
      `${ensUrl}/ops/clients`,
      'after sign-in the visitor is on the page they asked for',
    );
    t.equal(
      await textOf(page.locator('#whoami')),
      'ada@example.com',
      '#whoami shows the email claim, not the subject',
    );
    t.equal(
      await page.locator('nav[aria-label="Console"]').count(),
      1,
      'the console navigation is shown',
    );
    t.equal(
      idp.tokensIssued() >= 1,
      true,
      'the code was redeemed at the IdP (with the PKCE verifier: the IdP requires it)',
    );

    const { rows } = await svc.rt.db.query(
      `SELECT subject, email, groups FROM staff WHERE email = 'ada@example.com'`,
    );
    t.equal(rows.length, 1, 'a staff record was created at first sign-in');
    t.match(rows[0], { subject: 'u-7f3a-ada', email: 'ada@example.com' });

    // The session cookie: everything ENS set (the IdP's cookies share the host and are named
    // idp_*).
    const ensCookies = (await context.cookies(`${ensUrl}/ops/`)).filter(
      (c) => !c.name.startsWith('idp_'),
    );
    const session = ensCookies.filter((c) => c.httpOnly && c.sameSite === 'Lax');
    t.ok(
      session.length >= 1,
      `an httpOnly, SameSite=Lax session cookie (ENS cookies: ${ensCookies.map((c) => `${c.name} httpOnly=${c.httpOnly} sameSite=${c.sameSite}`).join('; ')})`,
    );
    t.ok(
      ensCookies.every((c) => !c.secure),
      'not Secure over plain http (ENS_PUBLIC_URL is http)',
    );
  },
);

t.test('a superuser by the allow-list (ENS_OPS_SUPERUSERS) gets the dashboard', async (t) => {
  const { page } = await con.signedIn(t, ALLOW_LISTED);
  t.equal(new URL(page.url()).pathname, '/ops/');
  t.same(await heading(page), { count: 1, text: 'Dashboard' });
  t.equal(await textOf(page.locator('#whoami')), ALLOW_LISTED);
});

t.test(
  'a signed-in user without superuser rights sees the notice and is refused every page and action',
  async (t) => {
    // Things the user will try to see and change: a client with a tenant, a delivery, a dead
    // letter.
    const client = await svc.createClient({ name: 'Not for Bob', callbackSecret: true });
    await svc.tenant(client, 'shop');
    const failing = await startReceiver(t, [500]);
    const sent = await svc.send(
      client,
      smsHandoff('shop', ['+15551230001'], { callback_url: failing.url }),
    );
    t.equal(sent.status, 202, sent.status === 202 ? 'the handoff is accepted' : sent.text);
    const deliveryId = sent.body.deliveries[0].delivery_id as string;
    await svc.rt.suppressions.upsert(client.clientId, [
      {
        tenant: 'shop',
        channel: 'sms',
        address: '+15551230001',
        reason: 'opt_out',
        source: 'provider',
        detail: 'STOP',
      },
    ]);
    const callbackId = await waitFor(
      async () => {
        const { rows } = await svc.rt.db.query(
          `SELECT id FROM callbacks WHERE delivery_id = $1 AND status = 'dead'`,
          [deliveryId],
        );
        return rows[0]?.id as string | undefined;
      },
      10_000,
      'a dead letter',
    );
    const { rows: ruleRows } = await svc.rt.db.query(
      `SELECT to_regclass('alert_rules') IS NOT NULL AS present`,
    );
    const alertRuleId = ruleRows[0].present
      ? ((await svc.rt.db.query('SELECT id FROM alert_rules ORDER BY id LIMIT 1')).rows[0]?.id ??
        '1')
      : '1';

    const snapshot = async () => {
      const q = async (sql: string) => (await svc.rt.db.query(sql)).rows;
      const tables = (
        await q(
          `SELECT to_regclass('alert_rules') IS NOT NULL AS rules, to_regclass('staff_grants') IS NOT NULL AS grants`,
        )
      )[0];
      return {
        clients: await q(
          'SELECT id, name, secret_hash, callback_secret_enc, disabled_at::text, rate_limit, ' +
            'daily_quota FROM clients ORDER BY id',
        ),
        tenants: await q('SELECT client_id, id, name, settings FROM tenants ORDER BY 1, 2'),
        callbacks: await q(
          'SELECT id, status, attempts, attempt_base, next_attempt_at::text FROM callbacks ' +
            'ORDER BY id',
        ),
        staffRights: await q('SELECT email, granted FROM staff ORDER BY email'),
        alertRules: tables.rules ? await q('SELECT * FROM alert_rules ORDER BY id') : [],
        staffGrants: tables.grants ? await q('SELECT * FROM staff_grants ORDER BY email') : [],
        suppressions: await q(
          'SELECT client_id, tenant, channel, address, scope, reason FROM suppressions ORDER ' +
            'BY 1, 2, 3, 4, 5',
        ),
        consent: await q(
          'SELECT id, suppression_reasons, bulk_event_types, must_deliver_event_types FROM ' +
            'clients ORDER BY id',
        ),
      };
    };
    const { page, context } = await con.signedIn(t, 'bob@example.com');
    // Taken after sign-in, which rightly records the staff member (without rights).
    const before = await snapshot();
    const postsBefore = failing.posts.length;
    t.equal(new URL(page.url()).pathname, '/ops/', 'back at /ops/ after sign-in');
    const again = await page.goto(`${ensUrl}/ops/`);
    t.equal(again?.status(), 403, 'the dashboard URL answers 403');
    t.same(await heading(page), { count: 1, text: NOTICE }, 'the access notice');
    t.equal(await textOf(page.locator('#whoami')), 'bob@example.com', 'who they are signed in as');
    t.match(await textOf(page.locator('#contact')), CONTACT, 'whom to ask (ENS_OPS_CONTACT)');
    t.equal(await page.locator('nav').count(), 0, 'no console navigation on the notice');
    t.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 1, 'a Sign out button');
    t.equal(await page.locator('#deliveries-last-hour').count(), 0, 'no dashboard numbers');
    await screenshot(page, 'notice');
    const token = await csrfToken(page);
    t.ok(
      token,
      "the notice's sign-out form carries a CSRF token (used below, to show the refusals are " +
        'about rights)',
    );

    for (const path of pagePaths({ deliveryId, clientId: client.clientId })) {
      const r = await page.goto(ensUrl + path);
      t.equal(r?.status(), 403, `GET ${path} → 403`);
      t.equal((await heading(page)).text, NOTICE, `GET ${path} shows the notice`);
      t.equal(
        await page.locator('nav[aria-label="Console"]').count(),
        0,
        `GET ${path}: no navigation`,
      );
      t.notOk((await pageText(page)).includes('Not for Bob'), `GET ${path} reveals no client data`);
    }
    const api = await context.request.get(`${ensUrl}/ops/api/summary`, { maxRedirects: 0 });
    t.equal(api.status(), 403, 'GET /ops/api/summary → 403');
    t.notOk((await api.text()).includes('"sms"'), 'and no numbers in it');

    const actions: [string, Record<string, string>][] = [
      ['/ops/clients', { name: 'created by bob', callback_secret: 'on' }],
      [`/ops/clients/${client.clientId}/rotate-secret`, {}],
      [`/ops/clients/${client.clientId}/callback-secret`, {}],
      [`/ops/clients/${client.clientId}/disable`, {}],
      [
        `/ops/clients/${client.clientId}/limits`,
        { rate: '1', quota_sms: '1', quota_email: '', quota_push: '', quota_whatsapp: '' },
      ],
      [
        `/ops/clients/${client.clientId}/consent`,
        { reasons_shown: '1', bulk_event_types: 'newsletter' },
      ],
      [
        '/ops/suppressions',
        {
          client: client.clientId,
          add_tenant: 'shop',
          add_channel: 'sms',
          add_address: '+15551230002',
          add_reason: 'manual',
          add_scope: '*',
          add_note: 'by bob',
        },
      ],
      [
        '/ops/suppressions/remove',
        {
          client: client.clientId,
          tenant: 'shop',
          channel: 'sms',
          address: '+15551230001',
          scope: '*',
          note: 'by bob',
        },
      ],
      [`/ops/dead-letters/${callbackId}/replay`, {}],
      ['/ops/dead-letters/replay-all', { client_id: client.clientId }],
      [
        '/ops/alerts',
        { name: 'bob rule', scope: 'event_type', value: 'x', threshold: '0.1', window: '5m' },
      ],
      [`/ops/alerts/${alertRuleId}/delete`, {}],
    ];
    for (const [path, form] of actions) {
      const without = await context.request.post(ensUrl + path, { form, maxRedirects: 0 });
      t.equal(without.status(), 403, `POST ${path} without a CSRF token → 403`);
      const withToken = await context.request.post(ensUrl + path, {
        form: { ...form, _csrf: token ?? '' },
        maxRedirects: 0,
      });
      t.equal(withToken.status(), 403, `POST ${path} with a valid CSRF token → 403`);
    }

    t.same(await snapshot(), before, 'nothing changed in the database');
    await new Promise((r) => setTimeout(r, 300)); // a wrongly queued replay would post within the first back-off step
    t.equal(failing.posts.length, postsBefore, 'no callback was re-posted');

    // The user can still sign out (with the same token), so the refusals above were about rights.
    await page.goto(`${ensUrl}/ops/`);
    await submitAndWait(page, page.getByRole('button', { name: 'Sign out' }));
    t.equal(new URL(page.url()).pathname, '/ops/signed-out', 'Sign out works from the notice');
  },
);

t.test('signing out ends the session: the old cookie no longer works', async (t) => {
  const { page, context } = await con.signedIn(t, 'ada@example.com');
  t.same(await heading(page), { count: 1, text: 'Dashboard' });
  const cookies = (await context.cookies(`${ensUrl}/ops/`)).filter(
    (c) => !c.name.startsWith('idp_'),
  );

  // Control: the same cookies in another browser are a working session before sign-out.
  const other = await openPage(t, con.browser);
  await other.context.addCookies(cookies);
  const before = await other.context.request.get(`${ensUrl}/ops/api/summary`, { maxRedirects: 0 });
  t.equal(before.status(), 200, 'the copied cookie works before sign-out');

  await submitAndWait(page, page.getByRole('button', { name: 'Sign out' }));
  t.equal(new URL(page.url()).pathname, '/ops/signed-out', 'Sign out lands on /ops/signed-out');
  t.same(await heading(page), { count: 1, text: 'You are signed out' });
  t.ok(
    (await page
      .locator('a[href^="/ops/login"], a[href="/ops/"], a[href^="/ops/login?"]')
      .count()) >= 1,
    'with a link to sign in again',
  );
  await screenshot(page, 'signed-out');

  const api = await other.context.request.get(`${ensUrl}/ops/api/summary`, { maxRedirects: 0 });
  t.equal(api.status(), 401, 'the old cookie: /ops/api/summary → 401');
  const dash = await other.context.request.get(`${ensUrl}/ops/`, { maxRedirects: 0 });
  t.equal(dash.status(), 302, 'the old cookie: /ops/ → 302');
  t.match(dash.headers().location ?? '', /\/ops\/login\?return_to=/, '… to sign in again');
});
