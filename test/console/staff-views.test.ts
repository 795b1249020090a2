import t from 'tap';
import type { Page } from 'playwright-core';
import { screenshot } from '../harness/browser.ts';
import { startReceiver, type ReceivedPost } from '../harness/receiver.ts';
import { uniqueKey, waitFor } from '../harness/service.ts';
import { heading, pageText, startConsole, submitAndWait, textOf } from './setup.ts';

/**
 * What a superuser sees and does in the console, against real traffic through the sandbox: the
 * dashboard's numbers equal the database's, deliveries are searched and paged on the server, a
 * client's secrets are shown once, dead letters are replayed and re-posted, and every action is in
 * the audit log. Each page visited is saved to test-artifacts/console/.
 */

const con = await startConsole(t);
const { svc, ensUrl } = con;
const db = svc.rt.db;

// --- traffic --------------------------------------------------------------------------------
const shopClient = await svc.createClient({ name: 'Acme Shop', callbackSecret: true });
await svc.tenant(shopClient, 'shop');
await svc.tenant(shopClient, 'bulk');
const okReceiver = await startReceiver(t, [200]);
/** Scripted by reference: the dead-letter test fixes the receiver by changing it. */
const deadScript = [500];
const deadReceiver = await startReceiver(t, deadScript);

const sms = (recipients: string[]) => ({
  channel: 'sms',
  recipients,
  content: { kind: 'rendered', body: 'hello' },
});
const email = (recipients: string[]) => ({
  channel: 'email',
  recipients,
  content: { kind: 'rendered', subject: 'Hi', body: 'hello' },
});
const send = async (handoff: Record<string, unknown>) => {
  const r = await svc.send(shopClient, handoff, uniqueKey('console'));
  if (r.status !== 202) throw new Error(`send failed: ${r.status} ${r.text}`);
  return r.body.deliveries as { delivery_id: string; channel: string; recipient: string }[];
};
// The sandbox table of docs/getting-started.md: 0000 / fail@ fail for good, 1111 / flaky@ fail
// twice then succeed, whatsapp 2222 is read.
const shipped = await send({
  tenant: 'shop',
  event_type: 'order.shipped',
  reference: 'order-1001',
  callback_url: okReceiver.url,
  messages: [
    sms(['+15551230001', '+15551230000', '+15551231111']),
    email(['ada.customer@example.com', 'fail@example.com']),
    {
      channel: 'whatsapp',
      recipients: ['+15551232222'],
      content: {
        kind: 'template',
        template_name: 'order_update',
        language: 'en',
        body_params: ['1001'],
      },
    },
  ],
});
const resets = await send({
  tenant: 'shop',
  event_type: 'password.reset',
  reference: 'reset-77',
  callback_url: deadReceiver.url,
  messages: [sms(['+15551239000']), email(['flaky@example.com'])],
});
const BULK = 60; // more than one page of 50
await send({
  tenant: 'bulk',
  event_type: 'newsletter',
  reference: 'news-1',
  messages: [sms(Array.from({ length: BULK }, (_, i) => `+1555400${String(1001 + i)}`))],
});
const idOf = (list: { delivery_id: string; recipient: string }[], recipient: string) =>
  list.find((d) => d.recipient.endsWith(recipient))!.delivery_id;
const flakySmsId = idOf(shipped, '1111');
const whatsappId = idOf(shipped, '2222');

// Settled: every delivery final, the order's callbacks delivered, the resets' callbacks dead,
// the whatsapp read receipt recorded.
await waitFor(
  async () => {
    const { rows } = await db.query(
      `SELECT
      (SELECT count(*)::int FROM deliveries WHERE status = 'pending') AS pending,
      (SELECT count(*)::int FROM callbacks WHERE status = 'pending') AS backlog,
      (SELECT count(*)::int FROM callbacks WHERE status = 'dead') AS dead,
      (SELECT count(*)::int FROM delivery_events WHERE delivery_id = $1) AS events`,
      [whatsappId],
    );
    const r = rows[0];
    return r.pending === 0 && r.backlog === 0 && r.dead === resets.length && r.events >= 2
      ? r
      : undefined;
  },
  20_000,
  'all deliveries final, callbacks delivered or dead, the read receipt in',
);
const deadIds: string[] = (
  await db.query(`SELECT id FROM callbacks WHERE status = 'dead' ORDER BY created_at, id`)
).rows.map((r) => r.id);

const CHANNELS = ['sms', 'email', 'push', 'whatsapp'] as const;
const STATUSES = ['pending', 'sent', 'failed'] as const;

async function countsSince(interval: string): Promise<Record<string, Record<string, number>>> {
  const out: Record<string, Record<string, number>> = {};
  for (const c of CHANNELS) out[c] = { pending: 0, sent: 0, failed: 0 };
  const { rows } = await db.query(
    `SELECT channel, status, count(*)::int AS n FROM deliveries WHERE created_at >= now() - $1::interval GROUP BY 1, 2`,
    [interval],
  );
  for (const r of rows) out[r.channel]![r.status] = r.n;
  return out;
}

async function countsShown(
  page: Page,
  tableId: string,
): Promise<Record<string, Record<string, number | string>>> {
  const out: Record<string, Record<string, number | string>> = {};
  for (const c of CHANNELS) {
    out[c] = {};
    for (const s of STATUSES) {
      const text = await textOf(
        page.locator(`#${tableId} tr[data-channel="${c}"] td[data-status="${s}"]`),
      );
      out[c]![s] = /^\d+$/.test(text) ? Number(text) : text;
    }
  }
  return out;
}

/**
 * The client the clients test creates through the console; the audit test looks for its actions.
 */
let createdClientId = '';

const rowIds = async (page: Page, table: string, attr: string): Promise<string[]> => {
  const ids: string[] = [];
  for (const row of await page.locator(`#${table} tr[${attr}]`).all())
    ids.push((await row.getAttribute(attr))!);
  return ids;
};

const dataRows = (page: Page, table: string) => page.locator(`#${table} tr:has(td)`);

t.test('a superuser signs in and sees the dashboard with the real numbers', async (t) => {
  const { page, context } = await con.signedIn(t, 'ada@example.com');
  t.equal(new URL(page.url()).pathname, '/ops/');
  t.same(await heading(page), { count: 1, text: 'Dashboard' });
  t.equal(await textOf(page.locator('#whoami')), 'ada@example.com');
  for (const link of [
    'Dashboard',
    'Deliveries',
    'Clients',
    'Dead letters',
    'Alerts',
    'Audit log',
  ]) {
    t.equal(
      await page
        .locator('nav[aria-label="Console"]')
        .getByRole('link', { name: link, exact: true })
        .count(),
      1,
      `nav link ${link}`,
    );
  }
  t.equal(await page.locator('main#main').count(), 1, '<main id="main">');
  t.equal(
    await page.getByRole('link', { name: 'Skip to content' }).getAttribute('href'),
    '#main',
    'a skip link to #main',
  );

  const hour = await countsSince('1 hour');
  t.same(
    hour.sms,
    { pending: 0, sent: 2 + 1 + BULK, failed: 1 },
    'the database agrees with what was sent (sms)',
  );
  t.same(
    await countsShown(page, 'deliveries-last-hour'),
    hour,
    '#deliveries-last-hour equals the database, cell by cell',
  );
  t.same(
    await countsShown(page, 'deliveries-last-day'),
    await countsSince('1 day'),
    '#deliveries-last-day equals the database',
  );
  t.ok(
    (await page.locator('svg[role="img"][aria-label]').count()) >= 2,
    'a labelled SVG chart per period',
  );

  const { rows } = await db.query(`SELECT
      (SELECT count(*)::int FROM callbacks WHERE status = 'pending') AS backlog,
      (SELECT count(*)::int FROM callbacks WHERE status = 'dead') AS dead`);
  t.equal(
    await textOf(page.locator('dd#callback-backlog')),
    String(rows[0].backlog),
    '#callback-backlog equals the database',
  );
  t.equal(
    await textOf(page.locator('dd#dead-letters')),
    String(rows[0].dead),
    '#dead-letters equals the database',
  );
  t.equal(rows[0].dead, 2, '(two dead letters)');

  t.match(
    await textOf(page.locator('#failure-rates #failures-by-event-type')),
    'order.shipped',
    'failure rate by event_type lists the failing event type',
  );
  t.match(
    await textOf(page.locator('#failure-rates #failures-by-tenant')),
    'shop',
    'failure rate by tenant lists the failing tenant',
  );
  t.equal(await page.locator('section#provider-health').count(), 1, 'provider health');
  t.equal(await page.locator('section#alerts-firing').count(), 1, 'firing alerts');
  await screenshot(page, 'dashboard');

  const summary = await context.request.get(`${ensUrl}/ops/api/summary`);
  t.equal(summary.status(), 200, 'GET /ops/api/summary → 200 for a superuser');
  t.match(summary.headers()['content-type'] ?? '', /application\/json/);
  t.type(await summary.json(), 'object');
});

t.test("deliveries: search, server-side paging and a delivery's page", async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/deliveries');
  t.equal(new URL(page.url()).pathname, '/ops/deliveries');
  t.equal((await heading(page)).count, 1);
  await screenshot(page, 'deliveries');

  // The filter form, by its labels.
  await page.getByLabel('Reference', { exact: true }).fill('order-1001');
  // Enter in the field submits the form, as a keyboard user would.
  await Promise.all([
    page.waitForURL((u) => u.searchParams.has('reference')),
    page.getByLabel('Reference', { exact: true }).press('Enter'),
  ]);
  t.equal(
    new URL(page.url()).searchParams.get('reference'),
    'order-1001',
    'the search is a GET with reference=',
  );
  const orderIds = (await db.query(`SELECT id FROM deliveries WHERE reference = 'order-1001'`)).rows
    .map((r) => r.id)
    .sort();
  t.same(
    (await rowIds(page, 'deliveries', 'data-delivery-id')).sort(),
    orderIds,
    "search by reference finds exactly the order's deliveries",
  );

  await page.goto(`${ensUrl}/ops/deliveries?status=failed&channel=sms`);
  const failedSms = (
    await db.query(`SELECT id FROM deliveries WHERE status = 'failed' AND channel = 'sms'`)
  ).rows
    .map((r) => r.id)
    .sort();
  t.same(
    (await rowIds(page, 'deliveries', 'data-delivery-id')).sort(),
    failedSms,
    'status and channel filters',
  );

  await page.goto(`${ensUrl}/ops/deliveries?tenant=bulk`);
  const first = await rowIds(page, 'deliveries', 'data-delivery-id');
  t.equal(first.length, 50, '50 rows on the first page');
  await submitAndWait(page, page.getByRole('link', { name: 'Next page' }));
  const second = await rowIds(page, 'deliveries', 'data-delivery-id');
  t.equal(second.length, BULK - 50, 'the rest on the next page');
  t.equal(
    await page.getByRole('link', { name: 'Next page' }).count(),
    0,
    'no Next page after the last',
  );
  const bulkIds = (await db.query(`SELECT id FROM deliveries WHERE tenant = 'bulk'`)).rows
    .map((r) => r.id)
    .sort();
  t.same(
    [...first, ...second].sort(),
    bulkIds,
    "the two pages together are the tenant's deliveries, each once",
  );

  // A delivery's page: the flaky sms (two transient failures, then sent) through the first-cell
  // link.
  await page.goto(`${ensUrl}/ops/deliveries?reference=order-1001`);
  await submitAndWait(
    page,
    page.locator(`#deliveries tr[data-delivery-id="${flakySmsId}"] td:first-child a`),
  );
  t.equal(new URL(page.url()).pathname, `/ops/deliveries/${flakySmsId}`);
  t.equal(await textOf(page.locator('h1 code')), flakySmsId, '<h1>Delivery <code>id</code></h1>');
  const attempts = (
    await db.query('SELECT number, outcome FROM attempts WHERE delivery_id = $1 ORDER BY number', [
      flakySmsId,
    ])
  ).rows;
  t.same(
    attempts.map((a) => a.outcome),
    ['transient', 'transient', 'sent'],
    '(the database has three attempts)',
  );
  t.equal(await dataRows(page, 'attempts').count(), 3, '#attempts lists the three attempts');
  const attemptsText = await textOf(page.locator('#attempts'));
  t.match(
    attemptsText,
    /transient[\s\S]*transient[\s\S]*sent|sent[\s\S]*transient[\s\S]*transient/,
    'with their outcomes',
  );
  const cbCount = (
    await db.query('SELECT count(*)::int AS n FROM callbacks WHERE delivery_id = $1', [flakySmsId])
  ).rows[0].n;
  t.equal(cbCount, 1);
  t.ok((await dataRows(page, 'callbacks').count()) >= cbCount, '#callbacks lists its callback');
  t.match(await textOf(page.locator('#callbacks')), 'delivered', 'and its state');
  await screenshot(page, 'delivery');

  // Provider events: the sandbox's read receipt for whatsapp 2222.
  await page.goto(`${ensUrl}/ops/deliveries/${whatsappId}`);
  const events = (
    await db.query('SELECT kind FROM delivery_events WHERE delivery_id = $1', [whatsappId])
  ).rows;
  t.equal(
    await dataRows(page, 'events').count(),
    events.length,
    '#events lists every provider event',
  );
  await screenshot(page, 'delivery-with-events');
});

t.test(
  'client creation shows the secrets once, with a copy button; rotate, limits, disable',
  async (t) => {
    const { page } = await con.signedIn(t, 'ada@example.com', '/ops/clients');
    t.equal(new URL(page.url()).pathname, '/ops/clients');
    t.ok(
      (await rowIds(page, 'clients', 'data-client-id')).includes(shopClient.clientId),
      'the clients table lists existing clients',
    );
    await screenshot(page, 'clients');

    const form = page.locator('form#create-client');
    t.equal(await form.getAttribute('method'), 'post');
    t.equal(await form.getAttribute('action'), '/ops/clients');
    await form.getByLabel('Name', { exact: true }).fill('Console Test Client');
    await form.getByLabel('Issue a callback secret').check();
    const created = page.waitForResponse(
      (r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/ops/clients',
    );
    await submitAndWait(page, form.getByRole('button', { name: 'Create client' }));
    const res = await created;
    t.equal(res.status(), 200, 'POST /ops/clients → 200 secret page');
    t.match(res.headers()['cache-control'] ?? '', /no-store/, 'Cache-Control: no-store');
    t.match((await heading(page)).text, 'shown once');
    const clientId = await textOf(page.locator('code#client-id'));
    createdClientId = clientId;
    const secret = await textOf(page.locator('code#client-secret'));
    const callbackSecret = await textOf(page.locator('code#callback-secret'));
    t.ok(
      clientId.length > 0 && secret.length >= 16 && callbackSecret.length >= 16,
      'id, secret and callback secret are shown',
    );
    const row = (
      await db.query(
        'SELECT name, callback_secret_enc IS NOT NULL AS has_cb FROM clients WHERE id = $1',
        [clientId],
      )
    ).rows[0];
    t.same(
      row,
      { name: 'Console Test Client', has_cb: true },
      'the client is in the database, with a callback secret',
    );

    const mint = async (id: string, s: string) =>
      (
        await fetch(`${ensUrl}/v1/oauth2/token/`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({
            grant_type: 'client_credentials',
            client_id: id,
            client_secret: s,
          }),
        })
      ).status;
    t.equal(
      await mint(clientId, secret),
      200,
      'the shown secret mints a token at /v1/oauth2/token/',
    );

    await page.locator('button[type="button"][data-copy="client-secret"]').click();
    await page
      .locator('[aria-live]')
      .filter({ hasText: 'Copied' })
      .first()
      .waitFor({ state: 'attached', timeout: 5_000 })
      .then(
        () => t.pass('"Copied" is announced in an aria-live region'),
        (e: Error) =>
          t.fail(`"Copied" is announced in an aria-live region: ${e.message.split('\n')[0]}`),
      );
    const copied = await page
      .evaluate('navigator.clipboard.readText()')
      .catch((e: Error) => `clipboard unreadable: ${e.message}`);
    t.equal(copied, secret, 'the Copy button put the secret on the clipboard');
    t.equal(
      await page.locator('button[data-copy="callback-secret"]').count(),
      1,
      'a Copy button for the callback secret',
    );
    await screenshot(page, 'client-secret');

    // Reload: whatever the browser does with it, the secrets are not shown again.
    await page
      .reload({ timeout: 10_000 })
      .catch((e: Error) => t.comment(`reload: ${e.message.split('\n')[0]}`));
    const afterReload = await page.content();
    t.notOk(
      afterReload.includes(secret) || afterReload.includes(callbackSecret),
      'after a reload the secrets are nowhere on the page',
    );
    t.equal(
      (await db.query(`SELECT count(*)::int AS n FROM clients WHERE name = 'Console Test Client'`))
        .rows[0].n,
      1,
      'the reload created no second client',
    );

    // The client's page, from the clients table.
    await page.goto(`${ensUrl}/ops/clients`);
    await submitAndWait(page, page.locator(`#clients tr[data-client-id="${clientId}"] a`).first());
    t.equal(new URL(page.url()).pathname, `/ops/clients/${clientId}`);
    const clientPage = await page.content();
    t.ok(clientPage.includes(clientId), 'the client page names the client');
    t.notOk(
      clientPage.includes(secret) || clientPage.includes(callbackSecret),
      'the client page shows neither secret',
    );
    await screenshot(page, 'client');

    // Rotate: a new secret, shown once; the old one stops working.
    await submitAndWait(
      page,
      page.locator(`form[action="/ops/clients/${clientId}/rotate-secret"] button`).first(),
    );
    t.match((await heading(page)).text, 'shown once', 'rotate shows the new secret once');
    const rotated = await textOf(page.locator('code#client-secret'));
    t.not(rotated, secret);
    t.equal(await mint(clientId, secret), 401, 'the old secret no longer mints');
    t.equal(await mint(clientId, rotated), 200, 'the new one does');

    await page.goto(`${ensUrl}/ops/clients/${clientId}`);
    await submitAndWait(
      page,
      page.locator(`form[action="/ops/clients/${clientId}/callback-secret"] button`).first(),
    );
    const newCallbackSecret = await textOf(page.locator('code#callback-secret'));
    t.ok(
      newCallbackSecret.length >= 16 && newCallbackSecret !== callbackSecret,
      'a new callback secret, shown once',
    );

    // Limits.
    await page.goto(`${ensUrl}/ops/clients/${clientId}`);
    const limits = page.locator(`form[action="/ops/clients/${clientId}/limits"]`);
    await limits.locator('input[name="rate"]').fill('50');
    await limits.locator('input[name="quota_sms"]').fill('1000');
    await submitAndWait(page, limits.locator('[type="submit"], button:not([type])').first());
    t.equal(
      new URL(page.url()).pathname,
      `/ops/clients/${clientId}`,
      'limits: back on the client page',
    );
    const limited = (
      await db.query('SELECT rate_limit, daily_quota FROM clients WHERE id = $1', [clientId])
    ).rows[0];
    t.equal(limited.rate_limit, 50, 'the rate limit is stored');
    t.equal(limited.daily_quota.sms, 1000, 'the sms quota is stored');

    // Disable.
    await submitAndWait(
      page,
      page.locator(`form[action="/ops/clients/${clientId}/disable"] button`).first(),
    );
    t.equal(
      new URL(page.url()).pathname,
      `/ops/clients/${clientId}`,
      'disable: back on the client page',
    );
    t.ok((await textOf(page.locator('p#flash[role="status"]'))).length > 0, 'with a flash message');
    t.ok(
      (await db.query('SELECT disabled_at FROM clients WHERE id = $1', [clientId])).rows[0]
        .disabled_at,
      'the client is disabled',
    );
    t.equal(await mint(clientId, rotated), 401, 'a disabled client cannot mint tokens');
    const final = await page.content();
    t.notOk(
      [secret, rotated, callbackSecret, newCallbackSecret].some((s) => final.includes(s)),
      'no secret on the client page, ever',
    );
  },
);

t.test(
  'dead letters: grouped by client, URL and error; one replayed from its group, then the group',
  async (t) => {
    const { page } = await con.signedIn(t, 'ada@example.com', '/ops/dead-letters');
    t.equal(new URL(page.url()).pathname, '/ops/dead-letters');
    const groups = page.locator('#dead-letter-groups tr[data-group]');
    t.equal(
      await groups.count(),
      1,
      'the two dead letters (one client, one URL, one error) are one group',
    );
    t.match(await textOf(groups.first()), 'Acme Shop', "with the client's name");
    t.equal(await page.getByLabel('Client', { exact: true }).count(), 0, 'no client id to type');
    await screenshot(page, 'dead-letters');

    // A callback's posts, told apart by their delivery (one callback per delivery here; the body
    // is built at each post from the callback's snapshot, migration 019).
    const postsOf = (deliveryId: string): ReceivedPost[] =>
      deadReceiver.posts.filter(
        (p) =>
          (JSON.parse(p.raw.toString('utf8')) as { delivery_id: string }).delivery_id ===
          deliveryId,
      );
    const deliveryOf = async (id: string): Promise<string> =>
      (await db.query('SELECT delivery_id FROM callbacks WHERE id = $1', [id])).rows[0].delivery_id;
    const [one, other] = deadIds as [string, string];
    const oneDelivery = await deliveryOf(one);
    t.equal(
      postsOf(oneDelivery).length,
      3,
      '(the receiver saw three failed posts before it became dead)',
    );

    // The group's page lists its callbacks, each with a Replay.
    await submitAndWait(
      page,
      groups.first().getByRole('link', { name: '2 dead letters of this group' }),
    );
    t.match(new URL(page.url()).pathname, /^\/ops\/dead-letters\/group\/[0-9a-f]{32}$/);
    t.same(
      (await rowIds(page, 'dead-letters', 'data-callback-id')).sort(),
      [...deadIds].sort(),
      'the dead letters in the database are listed',
    );
    await screenshot(page, 'dead-letter-group');

    deadScript[0] = 200; // the receiver is fixed
    const groupPath = new URL(page.url()).pathname;
    await submitAndWait(
      page,
      page
        .locator(`#dead-letters tr[data-callback-id="${one}"]`)
        .getByRole('button', { name: 'Replay' }),
    );
    t.equal(new URL(page.url()).pathname, groupPath, '303 back to the group');
    t.ok((await textOf(page.locator('p#flash[role="status"]'))).length > 0, 'with a flash message');
    const replayed = await waitFor(
      async () => postsOf(oneDelivery).find((p) => p.answered === 200),
      10_000,
      'the replayed post',
    );
    t.equal(
      replayed.headers['webhook-id'],
      postsOf(oneDelivery)[0]!.headers['webhook-id'],
      'the re-post keeps its webhook-id',
    );
    await waitFor(
      async () =>
        (await db.query('SELECT status FROM callbacks WHERE id = $1', [one])).rows[0].status ===
        'delivered',
      10_000,
      'delivered',
    );
    t.pass('the replayed callback is delivered');
    t.equal(
      (await db.query('SELECT status FROM callbacks WHERE id = $1', [other])).rows[0].status,
      'dead',
      'the other stays dead',
    );

    // The rest of the group, from the list.
    await page.goto(`${ensUrl}/ops/dead-letters`);
    await submitAndWait(
      page,
      page.locator('#dead-letter-groups tr[data-group]').getByRole('button', { name: 'Replay' }),
    );
    t.match(
      await textOf(page.locator('p#flash[role="status"]')),
      /^1 callback queued again$/,
      'flash: "1 callback queued again"',
    );
    const otherDelivery = await deliveryOf(other);
    await waitFor(
      async () => postsOf(otherDelivery).find((p) => p.answered === 200),
      10_000,
      'the re-post of the other',
    );
    t.pass('the group replay re-posted the remaining dead letter');
    await waitFor(
      async () =>
        (await db.query(`SELECT count(*)::int AS n FROM callbacks WHERE status = 'dead'`)).rows[0]
          .n === 0,
      10_000,
      'no dead letters left',
    );
    await page.goto(`${ensUrl}/ops/dead-letters`);
    t.equal(
      await page.locator('#dead-letter-groups tr[data-group]').count(),
      0,
      'the list is empty',
    );
    await screenshot(page, 'dead-letters-empty');
  },
);

t.test('the dashboard refreshes itself in place, and can be paused', async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/?refresh=2');
  const stamp = () => page.locator('#generated time').getAttribute('datetime');
  const first = await stamp();
  const sentBefore = Number(
    await textOf(
      page.locator('#deliveries-last-hour tr[data-channel="sms"] td[data-status="sent"]'),
    ),
  );
  await page.evaluate(`document.querySelector('main').dataset.marker = 'same-document'`);
  await send({ tenant: 'shop', event_type: 'refresh.check', messages: [sms(['+15551235555'])] });
  await waitFor(
    async () =>
      Number(
        await textOf(
          page.locator('#deliveries-last-hour tr[data-channel="sms"] td[data-status="sent"]'),
        ),
      ) > sentBefore,
    15_000,
    'the new sms on the dashboard without a reload',
  );
  t.not(await stamp(), first, "the numbers' time moved on");
  t.equal(
    await page.locator('main').getAttribute('data-marker'),
    'same-document',
    'swapped in place, not a page reload',
  );
  t.ok(
    (
      await page
        .locator('figure.series[data-channel="sms"][data-unit="minute"] svg[role="img"]')
        .getAttribute('aria-label')
    )?.includes('per minute over the last hour'),
    'the per-minute chart is there',
  );
  await screenshot(page, 'dashboard-refreshed');

  const toggle = page.getByRole('button', { name: 'Pause refresh' });
  await toggle.click();
  t.equal(await page.locator('#refresh-toggle').getAttribute('aria-pressed'), 'true', 'paused');
  const paused = await stamp();
  await new Promise((r) => setTimeout(r, 4_500));
  t.equal(await stamp(), paused, 'nothing changes while paused');
});

t.test('a delivery is resent from its page, as a new delivery', async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com', `/ops/deliveries/${flakySmsId}`);
  t.match(await textOf(page.locator('#message-content')), 'hello', 'the content it sent');
  t.equal(
    await page.locator('#handoff-deliveries tr[data-delivery-id]').count(),
    shipped.length - 1,
    'the other deliveries of its handoff',
  );
  await submitAndWait(page, page.getByRole('button', { name: 'Resend as a new delivery' }));
  const newId = new URL(page.url()).pathname.split('/').pop()!;
  t.not(newId, flakySmsId, "on the new delivery's page");
  t.match(
    await textOf(page.locator('p#flash[role="status"]')),
    `Resent as this new delivery, from ${flakySmsId}`,
  );
  const row = (await db.query('SELECT recipient, reference FROM deliveries WHERE id = $1', [newId]))
    .rows[0];
  t.same(
    row,
    { recipient: '+15551231111', reference: 'order-1001' },
    'same recipient and reference',
  );
  await screenshot(page, 'delivery-resent');
});

t.test('the alerts page', async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/alerts');
  t.equal(new URL(page.url()).pathname, '/ops/alerts');
  t.equal((await heading(page)).count, 1, 'one <h1>');
  t.ok(
    (await page.locator('form[method="post"][action="/ops/alerts"]').count()) >= 1,
    'a form to create a rule',
  );
  await screenshot(page, 'alerts');
});

t.test('the audit log lists the actions done', async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/audit');
  t.equal(new URL(page.url()).pathname, '/ops/audit');
  await screenshot(page, 'audit');
  const { rows } = await db.query(
    `SELECT action, target, actor FROM audit_log ORDER BY id DESC LIMIT 20`,
  );
  const ada = rows.filter((r) => r.actor === 'ada@example.com');
  const about = (id: string) => ada.filter((r) => String(r.target ?? '').includes(id));
  t.ok(
    createdClientId && about(createdClientId).length >= 5,
    `create, rotate, callback secret, limits and disable are audited (${about(createdClientId)
      .map((r) => r.action)
      .join(', ')})`,
  );
  t.ok(about(deadIds[0]!).length >= 1, 'the replay of one dead letter is audited');
  t.ok(
    ada.some((r) => r.action === 'dead_letter.replay_group' && r.target === shopClient.clientId),
    'the group replay is audited',
  );
  const text = await pageText(page);
  const missing = rows.filter(
    (r) => !text.includes(r.action) || (r.target && !text.includes(String(r.target))),
  );
  t.same(missing, [], 'every recent audit row (action and target) is on the page');
  t.match(text, 'ada@example.com', 'with the actor');
});
