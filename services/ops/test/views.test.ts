import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SchedulingStore } from '@ens/core';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../../../test/harness/service.ts';
import { startReceiver } from '../../../test/harness/receiver.ts';
import { evaluateAlerts } from '../src/alerts/evaluator.ts';
import { ConsoleBrowser, csrfOf, signInDirectly } from './console-session.ts';

/**
 * The console's pages and actions against a running service with real deliveries: the numbers
 * on the dashboard, the search, clients and their secrets, dead-letter replay, alert rules, the
 * audit log, and the start of the sign-in.
 */

// A provider that only answers discovery: enough to see where /ops/login sends the browser.
const idp = createServer((req, res) => {
  const base = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
  if (req.url === '/.well-known/openid-configuration') {
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
  } else res.writeHead(404).end();
});
await new Promise<void>((r) => idp.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => idp.close(() => r())));
const issuer = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;

const svc = await startTestService(t, {
  env: {
    ENS_OPS_ISSUER: issuer,
    ENS_OPS_CLIENT_ID: 'ens-console',
    ENS_OPS_CLIENT_SECRET: 'console-secret',
    ENS_OPS_SUPERUSERS: 'boss@example.com',
    ENS_CALLBACK_BACKOFF: '50ms',
  },
});
const rt = svc.rt;
const b = new ConsoleBrowser(svc.baseUrl);
await signInDirectly(rt, b, { subject: 'sub-boss', email: 'boss@example.com' });

t.test('sign-in starts at the provider with PKCE, state and nonce', async (t) => {
  const anon = new ConsoleBrowser(svc.baseUrl);
  const r = await anon.get('/ops/login?return_to=%2Fops%2Fclients');
  t.equal(r.status, 302);
  const to = new URL(r.headers.get('location')!);
  t.equal(`${to.origin}${to.pathname}`, `${issuer}/auth`);
  t.equal(to.searchParams.get('response_type'), 'code');
  t.equal(to.searchParams.get('client_id'), 'ens-console');
  t.equal(to.searchParams.get('redirect_uri'), `${svc.baseUrl}/ops/callback`);
  t.equal(to.searchParams.get('code_challenge_method'), 'S256');
  t.match(to.searchParams.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  t.ok(to.searchParams.get('state'));
  t.ok(to.searchParams.get('nonce'));
  t.equal(to.searchParams.get('scope'), 'openid email profile');
  const cookie = r.headers.getSetCookie().find((c) => c.startsWith('ens_ops_login='));
  t.match(cookie, /HttpOnly/i);
  t.match(cookie, /SameSite=Lax/i);
  t.match(cookie, /Path=\/ops/);
  // A callback without the browser's login state is refused politely.
  const cb = await new ConsoleBrowser(svc.baseUrl).get('/ops/callback?code=x&state=y');
  t.equal(cb.status, 400);
  t.match(cb.text, /could not be completed/);
  const refused = await anon.get('/ops/callback?error=access_denied&error_description=nope');
  t.equal(refused.status, 401);
  t.match(refused.text, /access_denied: nope/);
});

t.test('the dashboard shows the database numbers', async (t) => {
  const c = await svc.createClient({ name: 'dash' });
  await svc.tenant(c, 'acme');
  t.equal(
    (
      await svc.send(
        c,
        smsHandoff('acme', ['+15550001111', '+15550002222', '+15550000000'], {
          event_type: 'order.shipped',
        }),
      )
    ).status,
    202,
  );
  t.equal(
    (
      await svc.send(c, {
        tenant: 'acme',
        event_type: 'promo',
        messages: [
          {
            channel: 'email',
            recipients: ['a@example.com', 'fail@example.com'],
            content: { kind: 'rendered', subject: 's', body: 'b' },
          },
        ],
      })
    ).status,
    202,
  );
  await waitFor(
    async () =>
      (
        await rt.db.query(
          `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'pending'`,
          [c.clientId],
        )
      ).rows[0].n === 0,
    15_000,
    'deliveries to end',
  );
  const page = await b.get('/ops/');
  t.equal(page.status, 200);
  const { rows } = await rt.db.query(
    `SELECT channel, status, count(*)::int AS n FROM deliveries WHERE created_at > now() - interval '1 hour' GROUP BY 1, 2`,
  );
  for (const table of ['deliveries-last-hour', 'deliveries-last-day']) {
    const section = new RegExp(`<table id="${table}">([\\s\\S]*?)</table>`).exec(page.text)![1]!;
    for (const ch of ['sms', 'email', 'push', 'whatsapp']) {
      const row = new RegExp(`<tr data-channel="${ch}">([\\s\\S]*?)</tr>`).exec(section)![1]!;
      for (const st of ['pending', 'sent', 'failed']) {
        const n = Number(new RegExp(`<td data-status="${st}"[^>]*>(\\d+)</td>`).exec(row)![1]);
        t.equal(
          n,
          rows.find((r) => r.channel === ch && r.status === st)?.n ?? 0,
          `${table} ${ch} ${st}`,
        );
      }
    }
  }
  // Time series: per minute over the last hour and per hour over the last day, per channel, each
  // summing to the database's count of the window, with the failure rate in its label.
  const summary0 = JSON.parse((await b.get('/ops/api/summary')).text);
  t.equal(summary0.series.per_minute.buckets.length, 60, '60 one-minute buckets');
  t.equal(summary0.series.per_hour.buckets.length, 24, '24 one-hour buckets');
  const inWindow = async (sql: string) =>
    (
      await rt.db.query(
        `SELECT channel, status, count(*)::int AS n FROM deliveries WHERE ${sql} GROUP BY 1, 2`,
      )
    ).rows;
  for (const [key, where] of [
    ['per_minute', `created_at >= date_trunc('minute', now()) - interval '59 minutes'`],
    ['per_hour', `created_at >= date_trunc('hour', now()) - interval '23 hours'`],
  ] as const) {
    const db = await inWindow(where);
    for (const ch of ['sms', 'email']) {
      const points = summary0.series[key].by_channel[ch] as {
        pending: number;
        sent: number;
        failed: number;
      }[];
      for (const st of ['pending', 'sent', 'failed'] as const) {
        t.equal(
          points.reduce((a, p) => a + p[st], 0),
          db.find((r) => r.channel === ch && r.status === st)?.n ?? 0,
          `${key} ${ch} ${st} sums to the database's count`,
        );
      }
    }
  }
  const smsHour = rows.filter((r) => r.channel === 'sms');
  const n = (st: string) => smsHour.find((r) => r.status === st)?.n ?? 0;
  t.match(
    page.text,
    new RegExp(
      `<svg role="img" aria-label="sms, per minute over the last hour: ${n('sent')} sent, ${n('failed')} failed, ${n('pending')} pending; failure rate [\\d.]+%`,
    ),
    'the chart says its numbers and failure rate',
  );
  t.match(
    page.text,
    /<div id="live" data-live data-refresh="30">/,
    'the page refreshes itself every 30 s',
  );
  t.match(
    page.text,
    /<tr data-tenant="acme" data-client="[^"]+"><td>[\s\S]*?<\/td><td><a href="\/ops\/clients\/[^"]+" class="clip" title="[^"]+">dash<\/a>/,
    'failure rates by tenant name the client',
  );
  t.match(
    page.text,
    /<section id="failure-rates"[\s\S]*<table id="failures-by-event-type">[\s\S]*data-event-type="promo"[\s\S]*<table id="failures-by-tenant">[\s\S]*data-tenant="acme"/,
  );
  t.match(page.text, /<dd id="callback-backlog">\d+<\/dd>/);
  t.match(page.text, /<dd id="dead-letters">\d+<\/dd>/);
  t.match(page.text, /<section id="provider-health"[\s\S]*<tr data-provider="sandbox">/);
  t.match(page.text, /<section id="alerts-firing"/);
  const summary = JSON.parse((await b.get('/ops/api/summary')).text);
  t.match(
    summary.failure_rates.by_event_type.find(
      (r: { event_type: string }) => r.event_type === 'promo',
    ),
    { total: 2, failed: 1, rate_percent: 50 },
  );
  t.match(
    summary.providers.find((p: { provider: string }) => p.provider === 'sandbox'),
    { sent: Number, permanent: Number },
  );
});

t.test('delivery search and page', async (t) => {
  const c = await svc.createClient({ name: 'search' });
  await svc.tenant(c, 'shop');
  const sent = await svc.send(
    c,
    smsHandoff('shop', ['+15557770001'], { reference: 'ref-777', event_type: 'otp' }),
  );
  const id = sent.body.deliveries[0].delivery_id as string;
  await waitFor(
    async () =>
      (await rt.db.query(`SELECT status FROM deliveries WHERE id = $1`, [id])).rows[0].status ===
      'sent',
    10_000,
    'sent',
  );
  const byRef = await b.get('/ops/deliveries?reference=ref-777');
  t.equal(byRef.status, 200);
  t.equal((byRef.text.match(/<tr data-delivery-id=/g) ?? []).length, 1);
  t.match(
    byRef.text,
    new RegExp(`<tr data-delivery-id="${id}">\\s*<td><a href="/ops/deliveries/${id}">`),
  );
  for (const label of [
    'Reference',
    'Recipient',
    'Tenant',
    'Client',
    'Channel',
    'Status',
    'Event type',
    'Since',
    'Until',
  ])
    t.match(byRef.text, new RegExp(`<label for="[^"]+">${label}</label>`), `label ${label}`);
  t.equal(
    (
      await b.get(
        `/ops/deliveries?recipient=%2B15557770001&client=${c.clientId}&tenant=shop&channel=sms&status=sent&event_type=otp&since=2000-01-01T00:00`,
      )
    ).text.match(/<tr data-delivery-id=/g)?.length,
    1,
    'all filters together',
  );
  t.equal(
    (await b.get('/ops/deliveries?reference=ref-777&status=failed')).text.match(
      /<tr data-delivery-id=/g,
    ),
    null,
  );
  t.equal(
    (await b.get('/ops/deliveries?reference=ref-777&until=2000-01-01T00:00')).text.match(
      /<tr data-delivery-id=/g,
    ),
    null,
    'until excludes',
  );
  const bad = await b.get('/ops/deliveries?since=yesterday&channel=fax');
  t.equal(bad.status, 400);
  t.match(bad.text, /Not a time/);
  t.match(bad.text, /Choose one of sms, email, push, whatsapp/);
  t.match(bad.text, /aria-invalid="true"/);

  const page = await b.get(`/ops/deliveries/${id}`);
  t.equal(page.status, 200);
  t.match(page.text, new RegExp(`<h1>Delivery <code>${id}</code></h1>`));
  t.match(page.text, /<table id="attempts">[\s\S]*<code>sandbox<\/code>[\s\S]*status-sent/);
  t.match(page.text, /<table id="events">/);
  t.match(page.text, /<table id="callbacks">/);
  t.equal((await b.get('/ops/deliveries/not-a-uuid')).status, 404);
});

t.test('keyset paging of the search', async (t) => {
  const c = await svc.createClient({ name: 'pages' });
  await svc.tenant(c, 'bulk');
  const recipients = Array.from({ length: 120 }, (_, i) => `+1555880${String(i).padStart(4, '0')}`);
  t.equal((await svc.send(c, smsHandoff('bulk', recipients))).status, 202);
  const seen = new Set<string>();
  let url: string | null = `/ops/deliveries?client=${c.clientId}`;
  let pages = 0;
  while (url) {
    const r = await b.get(url);
    for (const m of r.text.matchAll(/<tr data-delivery-id="([^"]+)"/g)) seen.add(m[1]!);
    const next = /<a class="button secondary" rel="next" href="([^"]+)">Next page<\/a>/.exec(
      r.text,
    );
    url = next ? next[1]!.replace(/&amp;/g, '&') : null;
    pages++;
  }
  t.equal(pages, 3);
  t.equal(seen.size, 120, 'every delivery once');
});

t.test(
  'clients: create shows the secrets once; rotate, callback secret, limits, disable',
  async (t) => {
    const list = await b.get('/ops/clients');
    t.match(list.text, /<form id="create-client" method="post" action="\/ops\/clients"/);
    t.match(list.text, /<label for="f-name">Name<\/label>/);
    t.match(list.text, /<label for="f-callback_secret">Issue a callback secret<\/label>/);
    t.match(list.text, /<button type="submit" class="button">Create client<\/button>/);
    const token = csrfOf(list.text);

    const empty = await b.post('/ops/clients', { _csrf: token, name: '  ' });
    t.equal(empty.status, 400);
    t.match(empty.text, /Enter a name for the client/);

    const submission = /name="submission" value="([^"]+)"/.exec(list.text)![1]!;
    const created = await b.post('/ops/clients', {
      _csrf: token,
      submission,
      name: 'Billing <svc>',
      callback_secret: 'on',
    });
    t.equal(created.status, 200);
    t.equal(created.headers.get('cache-control'), 'no-store');
    t.match(created.text, /<h1>[^<]*shown once<\/h1>/);
    t.match(created.text, /Billing &lt;svc&gt;/, 'escaped');
    const clientId = /<code id="client-id">([^<]+)<\/code>/.exec(created.text)![1]!;
    const secret = /<code id="client-secret">([^<]+)<\/code>/.exec(created.text)![1]!;
    const cbSecret = /<code id="callback-secret">([^<]+)<\/code>/.exec(created.text)![1]!;
    t.match(cbSecret, /^whsec_/);
    t.match(created.text, /<button type="button" data-copy="client-secret">Copy<\/button>/);
    t.match(created.text, /aria-live="polite"/);
    // The secret works against the token endpoint.
    const tok = await fetch(`${svc.baseUrl}/v1/oauth2/token/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: clientId,
        client_secret: secret,
      }),
    });
    t.equal(tok.status, 200);
    // A reload re-posts the same form: nothing is created again and no secret is shown.
    const reload = await b.post('/ops/clients', {
      _csrf: token,
      submission,
      name: 'Billing <svc>',
      callback_secret: 'on',
    });
    t.equal(reload.status, 303, 'a reload of the secret page');
    t.equal(reload.headers.get('location'), `/ops/clients/${clientId}`);
    t.equal(
      (await rt.db.query(`SELECT count(*)::int AS n FROM clients WHERE name = 'Billing <svc>'`))
        .rows[0].n,
      1,
      'no second client',
    );
    const detail = await b.get(`/ops/clients/${clientId}`);
    t.equal(detail.status, 200);
    t.match(detail.text, /id="flash" role="status">That form was already submitted/);
    t.notMatch(
      detail.text,
      new RegExp(secret.replace(/[-_]/g, '.')),
      'the client page never shows the secret',
    );
    t.notMatch(detail.text, /whsec_/);
    t.match((await b.get('/ops/clients')).text, new RegExp(`<tr data-client-id="${clientId}">`));

    const rotateForm = new RegExp(
      `action="/ops/clients/${clientId}/rotate-secret"[\\s\\S]*?name="submission" value="([^"]+)"`,
    ).exec(detail.text)![1]!;
    const rotated = await b.post(`/ops/clients/${clientId}/rotate-secret`, {
      _csrf: csrfOf(detail.text),
      submission: rotateForm,
    });
    t.equal(rotated.status, 200);
    const rotatedAgain = await b.post(`/ops/clients/${clientId}/rotate-secret`, {
      _csrf: csrfOf(detail.text),
      submission: rotateForm,
    });
    t.equal(rotatedAgain.status, 303, 'a reload does not rotate again');
    const secret2 = /<code id="client-secret">([^<]+)<\/code>/.exec(rotated.text)![1]!;
    t.not(secret2, secret);
    const cb = await b.post(`/ops/clients/${clientId}/callback-secret`, {
      _csrf: csrfOf(detail.text),
    });
    t.match(cb.text, /<code id="callback-secret">whsec_/);
    t.notMatch(cb.text, /id="client-secret"/);

    const badLimits = await b.post(`/ops/clients/${clientId}/limits`, {
      _csrf: csrfOf(detail.text),
      rate: 'fast',
      quota_sms: '-5',
      quota_email: '10',
    });
    t.equal(badLimits.status, 400);
    t.match(badLimits.text, /Enter a whole number of requests per second/);
    t.match(badLimits.text, /Enter a whole number of messages/);
    t.match(badLimits.text, /value="fast"/, 'what was typed is kept');
    const limits = await b.post(`/ops/clients/${clientId}/limits`, {
      _csrf: csrfOf(detail.text),
      rate: '25',
      quota_sms: '1000',
      quota_email: '',
      quota_push: '',
      quota_whatsapp: '',
    });
    t.equal(limits.status, 303);
    const row = await rt.clients.get(clientId);
    t.equal(row!.rateLimit, 25);
    t.same(row!.dailyQuota, { sms: 1000 });
    const after = await b.get(`/ops/clients/${clientId}`);
    t.match(after.text, /<p id="flash" role="status">Limits saved.<\/p>/);
    t.notMatch((await b.get(`/ops/clients/${clientId}`)).text, /id="flash"/, 'a flash shows once');

    await rt.tenants.create(clientId, { tenant: 'retail' });
    const withTenant = await b.get(`/ops/clients/${clientId}`);
    t.match(
      withTenant.text,
      /<form id="schedule" method="post" action="\/ops\/clients\/[^"]+\/schedule"/,
      'the share form',
    );
    t.match(
      withTenant.text,
      /<input name="weight" value="1" size="3" inputmode="numeric" aria-label="Weight of tenant retail">/,
      'each tenant with its weight',
    );
    const badShare = await b.post(`/ops/clients/${clientId}/schedule`, {
      _csrf: csrfOf(withTenant.text),
      weight: '500',
      priority_event_types: 'otp code',
    });
    t.equal(badShare.status, 400);
    t.match(badShare.text, /The share was not saved: fix the marked fields/);
    t.match(badShare.text, /Enter a weight is a whole number from 1 to 100/);
    t.match(badShare.text, /&quot;otp code&quot; is not one/);
    t.match(badShare.text, /value="500"/, 'what was typed is kept');
    const share = await b.post(`/ops/clients/${clientId}/schedule`, {
      _csrf: csrfOf(withTenant.text),
      weight: '4',
      priority_event_types: 'otp.*, auth.code',
    });
    t.equal(share.status, 303);
    const tenantWeight = await b.post(`/ops/clients/${clientId}/tenants/retail/weight`, {
      _csrf: csrfOf(withTenant.text),
      weight: '3',
    });
    t.equal(tenantWeight.status, 303);
    t.same(
      await new SchedulingStore(rt.db).get(clientId),
      { weight: 4, priorityEventTypes: ['otp.*', 'auth.code'], tenantWeights: { retail: 3 } },
      'stored where the workers read them',
    );
    const shown = await b.get(`/ops/clients/${clientId}`);
    t.match(shown.text, /name="weight" type="text" value="4"/);
    t.match(shown.text, /value="otp\.\*, auth\.code"/);
    t.match(
      shown.text,
      /value="3" size="3" inputmode="numeric" aria-label="Weight of tenant retail"/,
    );
    t.equal(
      (
        await b.post(`/ops/clients/${clientId}/tenants/nope/weight`, {
          _csrf: csrfOf(shown.text),
          weight: '2',
        })
      ).status,
      404,
      'an unknown tenant',
    );

    const disabled = await b.post(`/ops/clients/${clientId}/disable`, {
      _csrf: csrfOf(after.text),
    });
    t.equal(disabled.status, 303);
    t.equal(disabled.headers.get('location'), `/ops/clients/${clientId}`);
    t.equal((await rt.clients.get(clientId))!.disabled, true);

    // A disabled client can be enabled again, or deleted (issue 25: neither was possible).
    const disabledPage = await b.get(`/ops/clients/${clientId}`);
    t.match(disabledPage.text, `action="/ops/clients/${clientId}/enable"`, 'an Enable button');
    t.match(disabledPage.text, `action="/ops/clients/${clientId}/delete"`, 'a Delete button');
    const enabled = await b.post(`/ops/clients/${clientId}/enable`, {
      _csrf: csrfOf(disabledPage.text),
    });
    t.equal(enabled.status, 303);
    t.equal((await rt.clients.get(clientId))!.disabled, false, 'enabled again');
    const activeDelete = await b.post(`/ops/clients/${clientId}/delete`, {
      _csrf: csrfOf(disabledPage.text),
    });
    t.equal(activeDelete.status, 303);
    t.ok(await rt.clients.get(clientId), 'an active client is not deleted');
    await b.post(`/ops/clients/${clientId}/disable`, { _csrf: csrfOf(disabledPage.text) });
    const deleted = await b.post(`/ops/clients/${clientId}/delete`, {
      _csrf: csrfOf(disabledPage.text),
    });
    t.equal(deleted.status, 303);
    t.equal(deleted.headers.get('location'), '/ops/clients');
    t.equal(await rt.clients.get(clientId), null, 'deleted: no longer found');
    t.notMatch((await b.get('/ops/clients')).text, `href="/ops/clients/${clientId}"`, 'nor listed');
    t.equal((await b.get(`/ops/clients/${clientId}`)).status, 404);

    const { rows } = await rt.db.query(
      `SELECT action FROM audit_log WHERE target = $1 ORDER BY id`,
      [clientId],
    );
    t.same(
      rows.map((r) => r.action),
      [
        'client.create',
        'client.rotate_secret',
        'client.issue_callback_secret',
        'client.limits',
        'client.schedule',
        'client.disable',
        'client.enable',
        'client.disable',
        'client.delete',
      ],
    );
    t.equal(
      (
        await rt.db.query(
          `SELECT 1 FROM audit_log WHERE action = 'tenant.weight' AND target = $1`,
          [`${clientId}/retail`],
        )
      ).rowCount,
      1,
      'the tenant weight is audited too',
    );
  },
);

t.test(
  'dead letters: grouped by client, URL and error; replay one, a group, all of a client',
  async (t) => {
    const script = [500];
    const receiver = await startReceiver(t, script);
    const c = await svc.createClient({ name: 'deadly', callbackSecret: true });
    await svc.tenant(c, 'dl');
    await svc.send(
      c,
      smsHandoff('dl', ['+15559990001', '+15559990002'], { callback_url: receiver.url }),
    );
    await svc.send(
      c,
      smsHandoff('dl', ['+15559990003'], { callback_url: `${receiver.url}?other=1` }),
    );
    const dead = await waitFor(
      async () => {
        const { rows } = await rt.db.query(
          `SELECT id::text FROM callbacks WHERE client_id = $1 AND status = 'dead' ORDER BY id`,
          [c.clientId],
        );
        return rows.length === 3 ? rows.map((r) => r.id as string) : null;
      },
      15_000,
      'three dead letters',
    );
    const page = await b.get(`/ops/dead-letters?client=${c.clientId}`);
    t.match(page.text, /<table id="dead-letter-groups">/);
    const groups = [
      ...page.text.matchAll(/<tr data-group="([0-9a-f]{32})" data-client="([^"]+)">/g),
    ].map((m) => ({ key: m[1]!, client: m[2]! }));
    t.equal(groups.length, 2, 'two groups: one per URL');
    t.ok(groups.every((g) => g.client === c.clientId));
    t.match(page.text, />deadly<\/a>/, 'the client is shown by name');
    t.match(page.text, />Replay 2<\/button>/, 'the larger group first, with its replay');
    t.match(page.text, />Replay all of this client<\/button>/);
    t.notMatch(page.text, /<input id="f-client"/, 'no client id to type');
    script[0] = 200; // the receiver is fixed

    // One callback of the larger group, from the group's page.
    const groupPage = await b.get(`/ops/dead-letters/group/${groups[0]!.key}`);
    t.equal(groupPage.status, 200);
    const inGroup = [...groupPage.text.matchAll(/<tr data-callback-id="([^"]+)">/g)].map(
      (m) => m[1]!,
    );
    t.equal(inGroup.length, 2);
    const postsBefore = receiver.posts.length;
    const one = await b.post(`/ops/dead-letters/${inGroup[0]}/replay`, {
      _csrf: csrfOf(groupPage.text),
      back: `/ops/dead-letters/group/${groups[0]!.key}`,
    });
    t.equal(one.status, 303);
    t.equal(one.headers.get('location'), `/ops/dead-letters/group/${groups[0]!.key}`);
    await waitFor(
      async () => receiver.posts.length > postsBefore,
      10_000,
      'the replayed callback to be posted again',
    );

    // The smaller group, by its key alone.
    const group = await b.post('/ops/dead-letters/replay-group', {
      _csrf: csrfOf(page.text),
      group: groups[1]!.key,
      back: `/ops/dead-letters?client=${c.clientId}`,
    });
    t.equal(group.status, 303);
    t.match(
      (await b.get(group.headers.get('location')!)).text,
      /<p id="flash" role="status">1 callback queued again<\/p>/,
    );
    const bad = await b.post('/ops/dead-letters/replay-group', {
      _csrf: csrfOf(page.text),
      group: 'not-a-key',
    });
    t.equal(bad.status, 303, 'a damaged group key replays nothing');

    // Everything left of the client.
    await waitFor(
      async () =>
        (
          await rt.db.query(
            `SELECT count(*)::int AS n FROM callbacks WHERE client_id = $1 AND status = 'dead'`,
            [c.clientId],
          )
        ).rows[0].n >= 1,
      10_000,
      'the rest still dead',
    );
    const all = await b.post('/ops/dead-letters/replay-all', {
      _csrf: csrfOf(page.text),
      client_id: c.clientId,
    });
    t.equal(all.status, 303);
    t.match(
      (await b.get(all.headers.get('location')!)).text,
      /<p id="flash" role="status">\d+ callbacks? queued again<\/p>/,
    );
    t.equal(
      (
        await rt.db.query(
          `SELECT count(*)::int AS n FROM callbacks WHERE id = ANY($1::uuid[]) AND status = 'dead'`,
          [dead],
        )
      ).rows[0].n,
      0,
      'none of the three is dead now',
    );
    const { rows } = await rt.db.query(
      `SELECT action, target FROM audit_log WHERE action LIKE 'dead_letter.%' ORDER BY id`,
    );
    t.same(
      rows.map((r) => r.action),
      ['dead_letter.replay', 'dead_letter.replay_group', 'dead_letter.replay_all'],
    );
    t.equal(rows[1].target, c.clientId, 'a group replay names its client in the audit log');
  },
);

t.test('alerts: rules, firing, one notification per firing, resolution', async (t) => {
  const hook = await startReceiver(t, [200]);
  const page = await b.get('/ops/alerts');
  const token = csrfOf(page.text);
  const bad = await b.post('/ops/alerts', {
    _csrf: token,
    name: '',
    scope: 'event_type',
    value: 'x',
    window_minutes: '0',
    min_volume: '1',
    threshold_percent: '50',
    destination: 'nope',
  });
  t.equal(bad.status, 400);
  t.match(bad.text, /Give the rule a name/);
  t.match(bad.text, /from 1 to 1440/);
  t.match(bad.text, /neither a valid email address nor a webhook URL/);
  const ok = await b.post('/ops/alerts', {
    _csrf: token,
    name: 'Alerts test',
    scope: 'event_type',
    value: 'alert.test',
    window_minutes: '60',
    min_volume: '2',
    threshold_percent: '50',
    destination: hook.url,
  });
  t.equal(ok.status, 303);
  const mail = await b.post('/ops/alerts', {
    _csrf: token,
    name: 'Mail test',
    scope: 'tenant',
    value: 'alerting',
    window_minutes: '60',
    min_volume: '2',
    threshold_percent: '50',
    destination: 'oncall@example.com',
  });
  t.equal(mail.status, 303);

  const c = await svc.createClient({ name: 'alerting' });
  await svc.tenant(c, 'alerting');
  await svc.send(
    c,
    smsHandoff('alerting', ['+15556660000', '+15556610000', '+15556620001'], {
      event_type: 'alert.test',
    }),
  );
  await waitFor(
    async () =>
      (
        await rt.db.query(
          `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'pending'`,
          [c.clientId],
        )
      ).rows[0].n === 0,
    10_000,
    'deliveries to end',
  );

  const first = await evaluateAlerts(rt);
  t.equal(first.fired.length, 2, 'both rules fire');
  t.equal(first.notified.length, 2);
  t.equal(hook.posts.length, 1, 'the webhook got one post');
  const body = JSON.parse(hook.posts[0]!.raw.toString());
  t.match(body, {
    type: 'ens.alert.firing',
    rule: { name: 'Alerts test', value: 'alert.test' },
    total: 3,
    failed: 2,
    rate_percent: 66.67,
  });
  const emails = await rt.db.query(
    `SELECT d.recipient, d.event_type, c.name FROM deliveries d JOIN clients c ON c.id = d.client_id WHERE d.tenant = 'ens-ops'`,
  );
  t.same(
    emails.rows,
    [{ recipient: 'oncall@example.com', event_type: 'ens.ops.alert', name: 'ens-ops-alerts' }],
    'the email went through the email channel as ens-ops-alerts',
  );

  const second = await evaluateAlerts(rt);
  t.same([second.fired, second.notified], [[], []], 'still firing: no second notification');
  t.equal(hook.posts.length, 1);

  const dash = await b.get('/ops/');
  t.match(dash.text, /<section id="alerts-firing"[\s\S]*Alerts test[\s\S]*<\/section>/);
  const alertsPage = await b.get('/ops/alerts');
  t.match(alertsPage.text, /Alerts test[\s\S]*firing/);

  // Deleting the rule is audited; its firings go with it.
  const ruleId =
    /<tr data-rule-id="(\d+)"><td><a class="clip" href="\/ops\/alerts\/\d+" title="Alerts test">/.exec(
      alertsPage.text,
    )![1]!;
  const del = await b.post(`/ops/alerts/${ruleId}/delete`, { _csrf: csrfOf(alertsPage.text) });
  t.equal(del.status, 303);
  t.equal(
    (await rt.db.query('SELECT count(*)::int AS n FROM alert_firings WHERE rule_id = $1', [ruleId]))
      .rows[0].n,
    0,
  );

  // The tenant rule resolves when its window holds no more failures.
  await rt.db.query(`UPDATE alert_rules SET min_volume = 1000 WHERE name = 'Mail test'`);
  const third = await evaluateAlerts(rt);
  t.equal(third.resolved.length, 1, 'resolved');
  const audit = await b.get('/ops/audit');
  t.match(audit.text, /<table id="audit">[\s\S]*alert_rule\.delete[\s\S]*alert_rule\.create/);
});

t.test('ens staff grant is visible in the audit page', async (t) => {
  const { AuditLog } = await import('../src/staff/audit-log.ts');
  await new AuditLog(rt.db).write({
    actor: 'cli',
    action: 'staff.grant',
    target: 'new@example.com',
  });
  const audit = await b.get('/ops/audit');
  t.match(
    audit.text,
    /<td><span class="clip" title="cli">cli<\/span><\/td><td><code>staff\.grant<\/code><\/td><td><span class="clip target" title="new@example.com">new@example.com<\/span><\/td>/,
  );
  t.ok(uniqueKey());
});

t.test(
  "a delivery's page: its content without secrets, times to the millisecond, its handoff, and " +
    'an audited resend',
  async (t) => {
    const c = await svc.createClient({ name: 'resender' });
    await svc.tenant(c, 'rs');
    const order = await svc.send(c, {
      tenant: 'rs',
      event_type: 'order.shipped',
      reference: 'order-4242',
      messages: [
        {
          channel: 'sms',
          recipients: ['+15558880001', '+15558880002'],
          content: { kind: 'rendered', body: 'Order 4242 shipped' },
        },
        {
          channel: 'email',
          recipients: ['buyer@example.com'],
          content: {
            kind: 'rendered',
            subject: 'Shipped',
            body: 'Order 4242 shipped',
            html: '<p>Order 4242 shipped</p>',
          },
        },
      ],
    });
    const otp = await svc.send(
      c,
      smsHandoff('rs', ['+15558880003'], {
        event_type: 'auth.otp',
        messages: [
          {
            channel: 'sms',
            recipients: ['+15558880003'],
            content: { kind: 'rendered', body: 'Your code is 493021' },
          },
        ],
      }),
    );
    t.equal(order.status, 202);
    t.equal(otp.status, 202);
    await waitFor(
      async () =>
        (
          await rt.db.query(
            `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'pending'`,
            [c.clientId],
          )
        ).rows[0].n === 0,
      15_000,
      'deliveries to end',
    );
    const ids = (order.body.deliveries as { delivery_id: string; channel: string }[]).map(
      (d) => d.delivery_id,
    );
    const [first, ...others] = ids as [string, ...string[]];

    const page = await b.get(`/ops/deliveries/${first}`);
    t.equal(page.status, 200);
    t.match(
      page.text,
      /<dl class="content" id="message-content">[\s\S]*<dt>body<\/dt><dd><pre tabindex="0">Order 4242 shipped<\/pre>/,
      'the content it sent',
    );
    t.match(
      page.text,
      /<time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC<\/time>/,
      'times to the millisecond',
    );
    const siblings = [
      .../<table id="handoff-deliveries">([\s\S]*?)<\/table>/
        .exec(page.text)![1]!
        .matchAll(/<tr data-delivery-id="([^"]+)">/g),
    ].map((m) => m[1]);
    t.same(siblings.sort(), [...others].sort(), 'the other deliveries of its handoff, not itself');

    const otpId = (otp.body.deliveries as { delivery_id: string }[])[0]!.delivery_id;
    const otpPage = await b.get(`/ops/deliveries/${otpId}`);
    t.notMatch(otpPage.text, /493021/, 'a one-time code is not shown');
    t.match(otpPage.text, /hidden: this event type carries one-time codes or links/);

    // Resend: a new delivery through the accept path; the old one keeps its outcome.
    const before = (
      await rt.db.query('SELECT status, version FROM deliveries WHERE id = $1', [first])
    ).rows[0];
    const submission = /name="submission" value="([^"]+)"/.exec(page.text)![1]!;
    const form = { _csrf: csrfOf(page.text), submission };
    const resent = await b.post(`/ops/deliveries/${first}/resend`, form);
    t.equal(resent.status, 303);
    const newId = /^\/ops\/deliveries\/([0-9a-f-]{36})$/.exec(
      resent.headers.get('location') ?? '',
    )?.[1];
    t.ok(newId && newId !== first, "to the new delivery's page");
    const pair = (
      await rt.db.query(
        `SELECT d.id::text, d.handoff_id::text, d.client_id, d.tenant, d.event_type, d.reference, d.channel, d.recipient, h.messages -> d.channel AS content, h.callback_url
       FROM deliveries d JOIN handoffs h ON h.id = d.handoff_id WHERE d.id = ANY($1::uuid[]) ORDER BY d.id`,
        [[first, newId]],
      )
    ).rows;
    t.equal(pair.length, 2);
    const [o, n] = pair[0].id === first ? [pair[0], pair[1]] : [pair[1], pair[0]];
    t.not(n.handoff_id, o.handoff_id, 'in a handoff of its own');
    t.same(
      { ...n, id: undefined, handoff_id: undefined },
      { ...o, id: undefined, handoff_id: undefined, callback_url: null },
      'same client, tenant, event type, reference, channel, recipient and content; no callback',
    );
    t.same(
      (await rt.db.query('SELECT status, version FROM deliveries WHERE id = $1', [first])).rows[0],
      before,
      'the original keeps its outcome and version',
    );
    const again = await b.post(`/ops/deliveries/${first}/resend`, form);
    t.equal(
      again.headers.get('location'),
      `/ops/deliveries/${newId}`,
      'the same form sent twice: the same new delivery',
    );
    t.equal(
      (
        await rt.db.query(
          `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND recipient = $2`,
          [c.clientId, o.recipient],
        )
      ).rows[0].n,
      2,
      'one resend, not two',
    );
    const audit = (
      await rt.db.query(
        `SELECT actor, target, detail FROM audit_log WHERE action = 'delivery.resend'`,
      )
    ).rows;
    t.same(
      audit.map((r) => [r.actor, r.target, r.detail.new_delivery_id]),
      [['boss@example.com', first, newId]],
      'audited once',
    );
    const bad = await b.post(`/ops/deliveries/${first}/resend`, {
      _csrf: csrfOf(page.text),
      submission: 'x',
    });
    t.equal(bad.status, 303, 'a damaged form sends nothing');
  },
);

t.test(
  "alerts: flagged when matching nothing, edited, muted, test-notified; ENS's own alert mail " +
    'kept apart',
  async (t) => {
    const hook = await startReceiver(t, [200]);
    const c = await svc.createClient({ name: 'mutable' });
    await svc.tenant(c, 'mt');
    await svc.send(
      c,
      smsHandoff('mt', ['+15557710000', '+15557720000', '+15557730001'], {
        event_type: 'mute.test',
      }),
    );
    await waitFor(
      async () =>
        (
          await rt.db.query(
            `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'pending'`,
            [c.clientId],
          )
        ).rows[0].n === 0,
      10_000,
      'deliveries to end',
    );
    const page = await b.get('/ops/alerts');
    const token = csrfOf(page.text);
    const rule = (value: string, threshold = '50') => ({
      _csrf: token,
      name: `Rule ${value}`,
      scope: 'event_type',
      value,
      window_minutes: '60',
      min_volume: '2',
      threshold_percent: threshold,
      destination: hook.url,
    });

    const typo = await b.post('/ops/alerts', rule('mute.tset'));
    t.match(
      (await b.get(typo.headers.get('location')!)).text,
      /Rule mute\.tset&quot; created, but no delivery of the last 24 hours has the event type &quot;mute\.tset&quot;, so this rule matches nothing yet/,
      'a misspelt event type is flagged',
    );
    const tenantTypo = await b.post('/ops/alerts', {
      ...rule('x'),
      scope: 'tenant',
      value: 'no-such-tenant',
    });
    t.match(
      (await b.get(tenantTypo.headers.get('location')!)).text,
      /no client has a tenant &quot;no-such-tenant&quot;/,
      'so is a tenant nobody has',
    );
    const ok = await b.post('/ops/alerts', rule('mute.test', '90'));
    t.match(
      (await b.get(ok.headers.get('location')!)).text,
      /<p id="flash" role="status">Rule &quot;Rule mute\.test&quot; created\.<\/p>/,
      'a rule that matches is not flagged',
    );
    const id = (await rt.db.query(`SELECT id::text FROM alert_rules WHERE value = 'mute.test'`))
      .rows[0].id as string;

    // Edit: the threshold goes down to 50 %; the audit log says what changed.
    const rulePage = await b.get(`/ops/alerts/${id}`);
    t.equal(rulePage.status, 200);
    t.match(rulePage.text, /<form id="edit-alert" method="post" action="\/ops\/alerts\/\d+"/);
    t.match(
      rulePage.text,
      /name="threshold_percent" type="text" value="90"/,
      "the form holds the rule's values",
    );
    const bad = await b.post(`/ops/alerts/${id}`, {
      ...rule('mute.test'),
      _csrf: csrfOf(rulePage.text),
      threshold_percent: '0',
    });
    t.equal(bad.status, 400, 'a bad edit is refused beside its field');
    t.match(bad.text, /above 0 and at most 100/);
    const edited = await b.post(`/ops/alerts/${id}`, {
      ...rule('mute.test'),
      _csrf: csrfOf(rulePage.text),
    });
    t.equal(edited.status, 303);
    t.equal(
      (
        await rt.db.query('SELECT threshold_percent::float8 AS t FROM alert_rules WHERE id = $1', [
          id,
        ])
      ).rows[0].t,
      50,
    );
    const change = (
      await rt.db.query(
        `SELECT detail FROM audit_log WHERE action = 'alert_rule.update' AND target = $1`,
        [id],
      )
    ).rows[0].detail;
    t.same(change, { threshold_percent: { from: '90', to: '50' } });

    // Muted: it fires, and nobody is told until it is unmuted.
    const muted = await b.post(`/ops/alerts/${id}/mute`, {
      _csrf: csrfOf(rulePage.text),
      for: '60',
    });
    t.equal(muted.status, 303);
    t.match(
      (await b.get(`/ops/alerts/${id}`)).text,
      /<span class="badge status-pending"[^>]*>muted until <time/,
    );
    const firstRound = await evaluateAlerts(rt);
    t.ok(firstRound.fired.length >= 1, 'the muted rule fires');
    t.equal(
      hook.posts.filter((p) => JSON.parse(p.raw.toString()).rule?.id === id).length,
      0,
      'and notifies nobody',
    );
    t.equal(
      (await b.post(`/ops/alerts/${id}/mute`, { _csrf: csrfOf(rulePage.text), for: 'a while' }))
        .status,
      303,
      'an unknown mute length changes nothing',
    );
    await b.post(`/ops/alerts/${id}/unmute`, { _csrf: csrfOf(rulePage.text) });
    await evaluateAlerts(rt);
    const fired = hook.posts
      .map((p) => JSON.parse(p.raw.toString()))
      .filter((p) => p.rule?.id === id);
    t.same(
      fired.map((p) => p.type),
      ['ens.alert.firing'],
      'unmuted while still firing: notified once',
    );

    // A test notification, on demand, audited.
    const tested = await b.post(`/ops/alerts/${id}/test`, { _csrf: csrfOf(rulePage.text) });
    t.match((await b.get(tested.headers.get('location')!)).text, /Test notification posted to/);
    const last = JSON.parse(hook.posts[hook.posts.length - 1]!.raw.toString());
    t.match(last, { type: 'ens.alert.test', rule: { id, name: 'Rule mute.test' } });
    t.same(
      (
        await rt.db.query(`SELECT action FROM audit_log WHERE target = $1 ORDER BY id`, [id])
      ).rows.map((r) => r.action),
      [
        'alert_rule.create',
        'alert_rule.update',
        'alert_rule.mute',
        'alert_rule.unmute',
        'alert_rule.test',
      ],
    );

    // ENS's own alert emails (sent by the earlier test) are apart from the customers' numbers.
    const summary = JSON.parse((await b.get('/ops/api/summary')).text);
    const own = (
      await rt.db.query(
        `SELECT count(*)::int AS n FROM deliveries d JOIN clients c ON c.id = d.client_id WHERE c.name = 'ens-ops-alerts' AND d.tenant = 'ens-ops' AND d.created_at >= now() - interval '1 day'`,
      )
    ).rows[0].n;
    t.ok(own >= 1, '(ENS sent an alert email through itself)');
    const count = (by: Record<string, { pending: number; sent: number; failed: number }>) =>
      Object.values(by).reduce((a, r) => a + r.pending + r.sent + r.failed, 0);
    t.equal(count(summary.internal.last_day), own, "counted as ENS's own");
    const customers = (
      await rt.db.query(
        `SELECT count(*)::int AS n FROM deliveries WHERE created_at >= now() - interval '1 day' AND tenant <> 'ens-ops'`,
      )
    ).rows[0].n;
    t.equal(count(summary.deliveries.last_day), customers, "and not in the customers' numbers");
    t.notOk(
      summary.failure_rates.by_tenant.some((r: { tenant: string }) => r.tenant === 'ens-ops'),
      'nor in their failure rates',
    );
    const dash = await b.get('/ops/');
    t.match(
      dash.text,
      /<p class="muted" id="internal-traffic">Not counted above: ENS's own alert emails/,
    );
  },
);
