import { join } from 'node:path';
import t from 'tap';
import type { Page } from 'playwright-core';
import { SCREENSHOT_DIR, screenshot } from '../harness/browser.ts';
import { uniqueKey, waitFor } from '../harness/service.ts';
import { csrfToken, heading, pageText, startConsole, submitAndWait, textOf } from './setup.ts';

/**
 * Consent in the console, in Chromium against a real OpenID Provider and real sends through the
 * sandbox: the dashboard's "Suppressions added per day by reason" and "Bounce and complaint rates
 * per tenant" panels equal the database (a tenant over the 0.3 % complaint line is flagged in
 * words and colour); a superuser adds an entry, finds it by address typed in another form, and
 * removes it, each with a note that the audit log shows; a delivery's page shows its bounce and
 * complaint and the recipient's entries; a non-superuser cannot reach the page or act, and POSTs
 * without a CSRF token change nothing. Pages are saved to test-artifacts/console/.
 */

const con = await startConsole(t);
const { svc, ensUrl } = con;
const db = svc.rt.db;
const sup = svc.rt.suppressions;

// --- traffic and reports, all before the first page view (the dashboard computes the consent
// panels at most every five minutes, so they must see this data on their first computation) ---
const client = await svc.createClient({ name: 'Acme Mail' });
await svc.tenant(client, 'shop');
await svc.tenant(client, 'news');
const emails = (tenant: string, recipients: string[]) => ({
  tenant,
  event_type: tenant === 'news' ? 'newsletter' : 'order.shipped',
  messages: [
    { channel: 'email', recipients, content: { kind: 'rendered', subject: 'Hi', body: 'hello' } },
  ],
});
const send = async (handoff: Record<string, unknown>) => {
  const r = await svc.send(client, handoff, uniqueKey('consent'));
  if (r.status !== 202) throw new Error(`send failed: ${r.status} ${r.text}`);
  return r.body.deliveries as { delivery_id: string; recipient: string }[];
};
// shop: 40 good addresses and one the sandbox refuses for good (a recipient refusal: the worker
// fails it and suppresses the address with source provider).
const shop = await send(
  emails('shop', [
    ...Array.from({ length: 40 }, (_, i) => `buyer${i}@example.com`),
    'fail@example.com',
  ]),
);
const news = await send(
  emails(
    'news',
    Array.from({ length: 30 }, (_, i) => `reader${i}@example.com`),
  ),
);
await waitFor(
  async () =>
    (await db.query(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'pending'`)).rows[0]
      .n === 0,
  20_000,
  'every send ended',
);
await waitFor(
  async () =>
    (await db.query(`SELECT count(*)::int AS n FROM suppressions WHERE source = 'provider'`))
      .rows[0].n === 1,
  10_000,
  'the refusal recorded',
);

const idOf = (list: { delivery_id: string; recipient: string }[], r: string) =>
  list.find((d) => d.recipient === r)!.delivery_id;
// Reports after the send, through the store's own door: a hard bounce and a complaint on shop.
const bouncedId = idOf(shop, 'buyer1@example.com');
await sup.reportForDelivery(
  { deliveryId: bouncedId },
  {
    kind: 'hard_bounce',
    source: 'bounce_mail',
    detail: '550 5.1.1 <buyer1@example.com>: Recipient address rejected: User unknown',
    at: new Date(),
  },
);
await sup.reportForDelivery(
  { deliveryId: bouncedId },
  {
    kind: 'complaint',
    source: 'complaint_mail',
    detail: 'ARF abuse report from a mailbox provider',
    at: new Date(),
  },
);
// And by SQL, as the brief's seed: one more bounce on shop, one bounce on news.
await db.query(`UPDATE deliveries SET bounced_at = now() WHERE id = ANY($1::uuid[])`, [
  [idOf(shop, 'buyer2@example.com'), idOf(news, 'reader3@example.com')],
]);
// Entries of several reasons and days, through rt.suppressions.
await sup.upsert(client.clientId, [
  {
    tenant: 'news',
    channel: 'email',
    address: 'reader5@example.com',
    scope: 'newsletter',
    reason: 'opt_out',
    source: 'unsubscribe',
  },
  {
    tenant: 'news',
    channel: 'email',
    address: 'reader6@example.com',
    scope: 'newsletter',
    reason: 'opt_out',
    source: 'unsubscribe',
  },
  {
    tenant: 'shop',
    channel: 'sms',
    address: '+15551239999',
    reason: 'opt_out',
    source: 'provider',
    provider: '@ens/plugin-twilio',
    detail: 'STOP',
  },
  {
    tenant: 'shop',
    channel: 'email',
    address: 'old-bounce@example.com',
    reason: 'hard_bounce',
    source: 'import',
  },
  {
    tenant: 'shop',
    channel: 'email',
    address: 'older@example.com',
    reason: 'soft_bounce',
    source: 'provider',
    detail: '452 mailbox full',
  },
]);
await db.query(
  `UPDATE suppressions SET created_at = now() - interval '3 days' WHERE address IN ('reader6@example.com', 'old-bounce@example.com')`,
);
await db.query(
  `UPDATE suppressions SET created_at = now() - interval '20 days' WHERE address = 'older@example.com'`,
);

const REASONS = [
  'hard_bounce',
  'soft_bounce',
  'complaint',
  'opt_out',
  'invalid_recipient',
  'manual',
] as const;

/** Saves one element of the page, as Chromium draws it. */
async function shot(page: Page, selector: string, name: string): Promise<void> {
  await page.locator(selector).screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`) });
}

t.test(
  "the dashboard shows suppressions per day by reason and each tenant's bounce and complaint " +
    'rates, with the 0.3 % line',
  async (t) => {
    const { page } = await con.signedIn(t, 'ada@example.com');
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.reload();
    t.same(await heading(page), { count: 1, text: 'Dashboard' });

    // Per day by reason: the database's counts over the last 14 days (UTC), reason by reason and
    // day by day.
    const { rows: perDay } =
      await db.query(`SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, reason, count(*)::int AS n FROM suppressions
                                            WHERE created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '13 days' GROUP BY 1, 2`);
    const total = (r: string) => perDay.filter((x) => x.reason === r).reduce((a, x) => a + x.n, 0);
    // The refusal (invalid recipient), the bounce that the complaint then replaced, the opt-outs,
    // the imported hard bounce.
    t.ok(
      total('invalid_recipient') === 1 &&
        total('hard_bounce') === 1 &&
        total('complaint') === 1 &&
        total('opt_out') === 3,
      `(the seed: ${JSON.stringify(perDay)})`,
    );
    t.equal(total('soft_bounce'), 0, '(the 20-day-old soft bounce is outside the window)');
    const fig = page.locator('#suppressions-per-day-chart');
    for (const r of REASONS)
      t.equal(
        await textOf(fig.locator(`figcaption [data-reason="${r}"]`)),
        String(total(r)),
        `${r}: the 14-day total`,
      );
    t.equal(
      await textOf(fig.locator('figcaption [data-count="all"]')),
      String(perDay.reduce((a, x) => a + x.n, 0)),
      'all reasons',
    );
    for (const d of perDay) {
      t.equal(
        await textOf(
          page.locator(
            `#suppressions-per-day tr[data-day="${d.day}"] td[data-reason="${d.reason}"]`,
          ),
        ),
        String(d.n),
        `${d.day} ${d.reason}: ${d.n}`,
      );
    }
    t.equal(
      await page.locator('#suppressions-per-day tbody tr').count(),
      14,
      'fourteen days in the table',
    );
    t.match(
      (await fig.locator('svg[role="img"]').getAttribute('aria-label')) ?? '',
      /Suppressions added per day over the last 14 days: \d+ in all/,
      'the chart says its numbers',
    );

    // Rates: counted here from the rows themselves, not with the page's SQL.
    const { rows: mail } = await db.query(
      `SELECT tenant, status, bounced_at IS NOT NULL AS bounced, complained_at IS NOT NULL AS complained, id::text FROM deliveries WHERE channel = 'email'`,
    );
    const refusedIds = new Set(
      (
        await db.query(
          `SELECT delivery_id::text FROM suppressions WHERE source = 'provider' AND reason IN ('hard_bounce', 'invalid_recipient') AND channel = 'email'`,
        )
      ).rows.map((r) => r.delivery_id),
    );
    for (const tenant of ['shop', 'news']) {
      const mine = mail.filter((m) => m.tenant === tenant);
      const sent = mine.filter((m) => m.status === 'sent').length;
      const bounced = mine.filter((m) => m.bounced).length;
      const refused = mine.filter(
        (m) => refusedIds.has(m.id) && m.status === 'failed' && !m.bounced,
      ).length;
      const complained = mine.filter((m) => m.complained).length;
      const row = page.locator(`#bounce-complaint-rates tr[data-tenant="${tenant}"]`);
      const cell = (sel: string) => textOf(row.locator(sel));
      t.equal(await cell('[data-count="sent"]'), String(sent), `${tenant}: sent ${sent}`);
      t.equal(
        await cell('[data-count="bounced"]'),
        String(bounced),
        `${tenant}: bounced ${bounced}`,
      );
      t.equal(
        await cell('[data-count="refused"]'),
        String(refused),
        `${tenant}: refused ${refused}`,
      );
      t.equal(
        await cell('[data-count="complained"]'),
        String(complained),
        `${tenant}: complaints ${complained}`,
      );
      const bounceRate = Math.round(((bounced + refused) / (sent + refused)) * 10000) / 100;
      const complaintRate = Math.round((complained / sent) * 10000) / 100;
      t.equal(
        await cell('[data-rate="bounce"]'),
        `${bounceRate.toFixed(bounceRate % 1 === 0 ? 0 : 2)}%`,
        `${tenant}: bounce rate ${bounceRate} %`,
      );
      t.equal(
        await cell('[data-rate="complaint"]'),
        `${complaintRate.toFixed(complaintRate % 1 === 0 ? 0 : 2)}%`,
        `${tenant}: complaint rate ${complaintRate} %`,
      );
      const over = complaintRate > 0.3;
      t.equal(
        await row.getAttribute('class'),
        over ? 'over-limit' : null,
        `${tenant}: ${over ? '' : 'not '}highlighted`,
      );
      t.match(await cell('.meter-cell'), over ? 'over 0.3 %' : 'under', `${tenant}: said in words`);
      t.equal(await row.locator('.meter-limit').count(), 1, `${tenant}: the 0.3 % line is drawn`);
    }
    t.match(
      await textOf(page.locator('#complaint-limit-warning')),
      /1 tenant is over the 0.3 % complaint limit/,
      'the warning counts the tenants over the line',
    );
    // The order: worst complaint rate first.
    t.equal(
      await page.locator('#bounce-complaint-rates tbody tr').first().getAttribute('data-tenant'),
      'shop',
      'worst first',
    );

    await screenshot(page, 'consent-dashboard');
    await page.locator('#suppressions-added details summary').click();
    await shot(page, '#suppressions-added', 'consent-dashboard-suppressions-per-day');
    await shot(page, '#bounce-rates', 'consent-dashboard-bounce-rates');
    const wide = (await page.evaluate(`document.documentElement.scrollWidth`)) as number;
    t.ok(wide <= 1280, `the dashboard does not scroll sideways at 1,280 px (${wide})`);
    const region = (await page.evaluate(
      `(() => { const r = document.querySelector('#bounce-complaint-rates').parentElement; return r.scrollWidth - r.clientWidth; })()`,
    )) as number;
    t.ok(region <= 1, `the rates table reads whole at 1,280 px (overflow ${region})`);
  },
);

t.test(
  'a superuser adds an entry, finds it by address, and removes it; the audit log shows both ' +
    'with the note',
  async (t) => {
    const { page } = await con.signedIn(t, 'ada@example.com', '/ops/clients');
    await page.setViewportSize({ width: 1280, height: 900 });
    await submitAndWait(
      page,
      page
        .locator('nav[aria-label="Console"]')
        .getByRole('link', { name: 'Suppressions', exact: true }),
    );
    t.equal(new URL(page.url()).pathname, '/ops/suppressions', 'Suppressions is in the navigation');
    t.equal(await page.locator('nav a[aria-current="page"]').textContent(), 'Suppressions');
    t.ok(await page.locator('#choose-client').count(), 'asks for a client first');

    // Choose the client and the tenant, as a person does.
    const search = page.getByRole('search', { name: 'Search the suppression lists' });
    await search
      .getByLabel('Client', { exact: true })
      .selectOption({ label: `Acme Mail (${client.clientId})` });
    await search.getByLabel('Tenant', { exact: true }).fill('shop');
    await submitAndWait(page, search.getByRole('button', { name: 'Search' }));
    const shopCount = (
      await db.query(
        `SELECT count(*)::int AS n FROM suppressions WHERE client_id = $1 AND tenant = 'shop'`,
        [client.clientId],
      )
    ).rows[0].n;
    t.match(
      await textOf(page.locator('#entry-count')),
      `${shopCount} entries in tenant shop`,
      'the count equals the database',
    );
    t.equal(
      await page.locator('#suppressions tbody tr[data-address]').count(),
      shopCount,
      'one row per entry',
    );
    // The refusal's evidence: the provider's words, the plugin, and a link to the delivery that was
    // refused.
    const refusal = page.locator('#suppressions tr[data-address="fail@example.com"]');
    const failId = idOf(shop, 'fail@example.com');
    t.match(await textOf(refusal), /invalid recipient[\s\S]*provider/, 'reason and source');
    t.equal(
      await refusal.locator(`a[href="/ops/deliveries/${failId}"]`).count(),
      1,
      'the evidence links to the refused delivery',
    );
    await screenshot(page, 'suppressions-tenant');

    // Add: the form keeps its default reason (manual); a bad address is refused and changes
    // nothing.
    const add = page.locator('form#add-suppression');
    t.equal(
      await add.getByLabel('Reason', { exact: true }).inputValue(),
      'manual',
      'reason defaults to manual',
    );
    t.equal(
      await add.getByLabel('Tenant', { exact: true }).inputValue(),
      'shop',
      'the tenant searched is filled in',
    );
    const before = (await db.query('SELECT count(*)::int AS n FROM suppressions')).rows[0].n;
    await add.getByLabel('Address', { exact: true }).fill('zoe at example');
    await add.getByLabel('Note (why)').fill('asked on the phone, ticket 4411');
    await submitAndWait(page, add.getByRole('button', { name: 'Add to the suppression list' }));
    t.match(
      await textOf(page.locator('#add-suppression .error-summary')),
      'Nothing was added',
      'a bad address: the form says nothing was added',
    );
    t.equal(
      await page.locator('#f-add_address').getAttribute('aria-invalid'),
      'true',
      'the address is marked',
    );
    t.match(await textOf(page.locator('#f-add_address-error')), 'Not an email address');
    t.equal(
      (await db.query('SELECT count(*)::int AS n FROM suppressions')).rows[0].n,
      before,
      'nothing changed',
    );
    await screenshot(page, 'suppressions-add-error');

    await page.locator('#f-add_address').fill(' Zoe.Customer@EXAMPLE.com ');
    await submitAndWait(page, page.getByRole('button', { name: 'Add to the suppression list' }));
    t.match(
      await textOf(page.locator('p#flash[role="status"]')),
      'Added: email zoe.customer@example.com in tenant shop',
      'flash',
    );
    const stored = (
      await db.query(
        `SELECT reason, source, created_by, detail, scope FROM suppressions WHERE client_id = $1 AND tenant = 'shop' AND address = 'zoe.customer@example.com'`,
        [client.clientId],
      )
    ).rows;
    t.same(
      stored,
      [
        {
          reason: 'manual',
          source: 'console',
          created_by: 'ada@example.com',
          detail: 'asked on the phone, ticket 4411',
          scope: '*',
        },
      ],
      'stored normalised, with source console and who added it',
    );

    // Find it by address typed another way, across every tenant of the client.
    await page.goto(`${ensUrl}/ops/suppressions?client=${client.clientId}`);
    await page
      .getByRole('search')
      .getByLabel('Address', { exact: true })
      .fill('ZOE.customer@Example.Com');
    await submitAndWait(page, page.getByRole('search').getByRole('button', { name: 'Search' }));
    const found = page.locator('#suppressions tbody tr[data-address]');
    t.equal(await found.count(), 1, 'one entry found across the tenants');
    t.equal(await found.getAttribute('data-address'), 'zoe.customer@example.com');
    t.match(
      await textOf(found),
      /shop[\s\S]*manual[\s\S]*console · ada@example.com[\s\S]*asked on the phone, ticket 4411/,
      'tenant, reason, source, who and the note',
    );
    await screenshot(page, 'suppressions-found');

    // Remove, with a confirmation and a note.
    await submitAndWait(page, found.getByRole('link', { name: /^Remove/ }));
    t.same(await heading(page), { count: 1, text: 'Remove an entry' }, 'a confirmation page');
    t.equal(
      await textOf(page.locator('#remove-address')),
      'zoe.customer@example.com',
      'naming the entry',
    );
    await screenshot(page, 'suppressions-remove-confirm');
    await page.getByLabel('Note (why)').fill('customer asked to get mail again, ticket 4412');
    await submitAndWait(page, page.getByRole('button', { name: 'Remove entry' }));
    t.match(
      await textOf(page.locator('p#flash[role="status"]')),
      'Removed: email zoe.customer@example.com in tenant shop',
      'flash',
    );
    t.equal(
      await page.locator('#suppressions tbody tr[data-address]').count(),
      0,
      'the search no longer finds it',
    );
    t.equal(
      (
        await db.query(
          `SELECT count(*)::int AS n FROM suppressions WHERE address = 'zoe.customer@example.com'`,
        )
      ).rows[0].n,
      0,
      'gone from the database',
    );

    // The audit log: both actions, by ada, with the client, tenant, address and note.
    await page.goto(`${ensUrl}/ops/audit`);
    const added = page.locator('#audit tr[data-action="suppression.add"]').first();
    const removed = page.locator('#audit tr[data-action="suppression.remove"]').first();
    for (const [row, note] of [
      [added, 'asked on the phone, ticket 4411'],
      [removed, 'customer asked to get mail again, ticket 4412'],
    ] as const) {
      const text = await textOf(row);
      t.match(text, 'ada@example.com', 'who');
      t.match(text, `${client.clientId}/shop`, 'client and tenant');
      t.match(text, 'zoe.customer@example.com', 'the address');
      t.match(
        (await row.locator('.detail').getAttribute('title')) ?? '',
        note,
        `the note: ${note}`,
      );
    }
    await screenshot(page, 'suppressions-audit');
  },
);

t.test('the client page shows and edits the consent policy, audited', async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com', `/ops/clients/${client.clientId}`);
  t.match(
    await textOf(page.locator('#policy-reasons')),
    'hard bounce, soft bounce, complaint, opt-out, invalid recipient, manual',
    'every reason by default',
  );
  const form = page.locator('form#consent-policy');
  await form.getByLabel('manual', { exact: true }).uncheck();
  await form.getByLabel('Bulk event types').fill('newsletter, promo');
  await form.getByLabel('Must-deliver event types').fill('password.reset');
  await submitAndWait(page, form.getByRole('button', { name: 'Save consent policy' }));
  t.match(await textOf(page.locator('p#flash[role="status"]')), 'Consent policy saved');
  t.same(
    await sup.policy(client.clientId),
    {
      suppression_reasons: [
        'hard_bounce',
        'soft_bounce',
        'complaint',
        'opt_out',
        'invalid_recipient',
      ],
      bulk_event_types: ['newsletter', 'promo'],
      must_deliver_event_types: ['password.reset'],
    },
    'stored',
  );
  t.equal(await textOf(page.locator('#policy-bulk')), 'newsletter, promo');
  // Contradictory input: refused, shown, nothing changed.
  await form.getByLabel('Must-deliver event types').fill('promo');
  await submitAndWait(page, form.getByRole('button', { name: 'Save consent policy' }));
  t.match(
    await textOf(page.locator('#consent-policy .error-summary')),
    'The consent policy was not saved',
  );
  t.match(
    await textOf(page.locator('#f-must_deliver_event_types-error')),
    'promo cannot be both bulk and must-deliver',
  );
  t.same(
    (await sup.policy(client.clientId))!.must_deliver_event_types,
    ['password.reset'],
    'unchanged',
  );
  await page.locator('#consent').scrollIntoViewIfNeeded();
  await shot(page, '#consent', 'consent-policy');
  const audit = (
    await db.query(
      `SELECT actor, detail FROM audit_log WHERE action = 'client.consent_policy' AND target = $1`,
      [client.clientId],
    )
  ).rows;
  t.equal(audit.length, 1, 'one audited change');
  t.match(audit[0], {
    actor: 'ada@example.com',
    detail: { after: { bulk_event_types: ['newsletter', 'promo'] } },
  });
});

t.test(
  "a delivery's page shows its bounce and complaint and the recipient's entries",
  async (t) => {
    const { page } = await con.signedIn(t, 'ada@example.com', `/ops/deliveries/${bouncedId}`);
    const facts = await textOf(page.locator('dl.facts'));
    t.match(facts, /Bounced\s*\d{4}-\d\d-\d\d/, 'bounced_at');
    t.match(facts, /Complained \(marked as spam\)\s*\d{4}-\d\d-\d\d/, 'complained_at');
    const events = page.locator('#suppression-events tbody tr[data-kind]');
    const kinds: (string | null)[] = [];
    for (const e of await events.all()) kinds.push(await e.getAttribute('data-kind'));
    t.same(kinds, ['hard_bounce', 'complaint'], 'both reports, in order');
    t.match(
      await textOf(page.locator('#suppression-events')),
      'User unknown',
      "with the bounce's own words",
    );
    const entries = page.locator('#recipient-suppressions tbody tr[data-reason]');
    t.equal(await entries.count(), 1, "the recipient's entry in this tenant");
    t.equal(
      await entries.getAttribute('data-reason'),
      'complaint',
      'the later report (the complaint) is the standing reason',
    );
    await page.locator('#consent').scrollIntoViewIfNeeded();
    await shot(page, '#consent', 'delivery-bounces');

    const plain = idOf(news, 'reader9@example.com');
    await page.goto(`${ensUrl}/ops/deliveries/${plain}`);
    t.notMatch(
      await textOf(page.locator('dl.facts')),
      /Bounced|Complained/,
      'a delivery without reports shows neither time',
    );
    t.match(await textOf(page.locator('#suppression-events')), 'No bounce or complaint reported');
  },
);

t.test(
  'a non-superuser cannot reach the page or act, and CSRF-less POSTs change nothing',
  async (t) => {
    const state = async () => ({
      entries: (
        await db.query(
          'SELECT client_id, tenant, channel, address, scope, reason FROM suppressions ORDER ' +
            'BY 1, 2, 3, 4, 5',
        )
      ).rows,
      // Sign-ins are audited too; the actions are what must not appear.
      audit: (
        await db.query(
          `SELECT count(*)::int AS n FROM audit_log WHERE action NOT IN ('staff.sign_in', 'staff.sign_out')`,
        )
      ).rows[0].n,
      policy: await sup.policy(client.clientId),
    });
    const before = await state();
    const { page, context } = await con.signedIn(t, 'bob@example.com', '/ops/suppressions');
    const r = await page.goto(`${ensUrl}/ops/suppressions?client=${client.clientId}&tenant=shop`);
    t.equal(r?.status(), 403, 'GET /ops/suppressions → 403');
    t.match((await heading(page)).text, "You don't have access to the ENS console");
    t.notOk((await pageText(page)).includes('fail@example.com'), 'no entry shown');
    t.equal(await page.locator('nav').count(), 0, 'no navigation');
    const token = await csrfToken(page);
    const actions: [string, Record<string, string>][] = [
      [
        '/ops/suppressions',
        {
          client: client.clientId,
          add_tenant: 'shop',
          add_channel: 'email',
          add_address: 'bob@example.com',
          add_note: 'x',
        },
      ],
      [
        '/ops/suppressions/remove',
        {
          client: client.clientId,
          tenant: 'shop',
          channel: 'email',
          address: 'fail@example.com',
          scope: '*',
          note: 'x',
        },
      ],
      [`/ops/clients/${client.clientId}/consent`, { reasons_shown: '1', bulk_event_types: 'x' }],
    ];
    for (const [path, form] of actions) {
      t.equal(
        (await context.request.post(ensUrl + path, { form, maxRedirects: 0 })).status(),
        403,
        `bob: POST ${path} without a token → 403`,
      );
      t.equal(
        (
          await context.request.post(ensUrl + path, {
            form: { ...form, _csrf: token ?? '' },
            maxRedirects: 0,
          })
        ).status(),
        403,
        `bob: POST ${path} with a valid token → 403`,
      );
    }
    // A superuser's session, but no token: refused.
    const ada = await con.signedIn(
      t,
      'ada@example.com',
      `/ops/suppressions?client=${client.clientId}&tenant=shop`,
    );
    for (const [path, form] of actions) {
      const res = await ada.context.request.post(ensUrl + path, { form, maxRedirects: 0 });
      t.equal(res.status(), 403, `ada: POST ${path} without a CSRF token → 403`);
      t.match(await res.text(), 'This form could not be accepted');
    }
    t.same(await state(), before, 'nothing changed');
  },
);
