import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import t from 'tap';
import type { Page } from 'playwright-core';
import { startConsole } from './setup.ts';

/**
 * Every console page passes axe-core's WCAG 2.1 A/AA rules (labels, names, contrast, landmarks,
 * headings) as Chromium renders it, and can be worked with the keyboard alone: the first Tab
 * reaches the skip link, which moves focus to the content.
 */
const axeSource = await readFile(
  createRequire(import.meta.url).resolve('axe-core/axe.min.js'),
  'utf8',
);

interface AxeResult {
  violations: { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[];
}

async function audit(page: Page): Promise<AxeResult['violations']> {
  // Evaluated through the DevTools protocol: the console's CSP (script-src 'self') rightly refuses
  // inline scripts.
  await page.evaluate(axeSource);
  // Strings, not functions: this file is compiled without the DOM library.
  const r = (await page.evaluate(
    `axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })`,
  )) as AxeResult;
  return r.violations;
}

const con = await startConsole(t);
const client = await con.svc.createClient({ name: 'a11y' });
await con.svc.tenant(client, 'shop');
await con.svc.send(client, {
  tenant: 'shop',
  event_type: 'a11y.check',
  messages: [
    {
      channel: 'sms',
      recipients: ['+15551230000', '+15551234567'],
      content: { kind: 'rendered', body: 'hi' },
    },
  ],
});
const delivery = await con.svc.rt.db.query<{ id: string }>(
  'SELECT id::text FROM deliveries LIMIT 1',
);
// A dead letter and an alert rule, so their pages (a dead-letter group, a rule) have content to
// check.
await con.svc.rt.db.query(
  `INSERT INTO callbacks (id, delivery_id, client_id, url, body, status, attempts, last_error) VALUES (gen_random_uuid(), $1, $2, 'https://hooks.example.com/ens', '{}', 'dead', 3, 'HTTP 500')`,
  [delivery.rows[0]!.id, client.clientId],
);
const group = (
  await con.svc.rt.db.query(
    `SELECT md5(client_id || E'\\n' || url || E'\\n' || coalesce(last_error, E'\\x01')) AS key FROM callbacks LIMIT 1`,
  )
).rows[0].key as string;
const rule = (
  await con.svc.rt.db.query(
    `INSERT INTO alert_rules (name, scope, value, window_minutes, min_volume, threshold_percent, destination_kind, destination, created_by)
   VALUES ('a11y rule', 'tenant', 'shop', 15, 1, 10, 'email', 'oncall@example.com', 'test') RETURNING id::text`,
  )
).rows[0].id as string;

// Consent: an entry with its evidence, a report on the delivery, so the suppression pages, the
// dashboard's consent panels and the delivery's bounces have content to check.
await con.svc.rt.suppressions.upsert(client.clientId, [
  {
    tenant: 'shop',
    channel: 'sms',
    address: '+15551230000',
    reason: 'invalid_recipient',
    source: 'provider',
    provider: '@ens/plugin-sandbox',
    deliveryId: delivery.rows[0]!.id,
    detail: 'sandbox: sms recipient is set up to fail',
  },
  {
    tenant: 'shop',
    channel: 'email',
    address: 'ann@example.com',
    scope: 'newsletter',
    reason: 'opt_out',
    source: 'unsubscribe',
  },
]);
await con.svc.rt.suppressions.reportForDelivery(
  { deliveryId: delivery.rows[0]!.id },
  { kind: 'soft_bounce', source: 'provider', detail: '452 4.2.2 mailbox full', at: new Date() },
);

t.test('every console page passes the WCAG 2.1 AA rules of axe-core', async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com');
  const pages = [
    '/ops/',
    '/ops/deliveries',
    `/ops/deliveries/${delivery.rows[0]!.id}`,
    '/ops/clients',
    `/ops/clients/${client.clientId}`,
    '/ops/dead-letters',
    `/ops/dead-letters/group/${group}`,
    '/ops/alerts',
    `/ops/alerts/${rule}`,
    '/ops/audit',
    '/ops/suppressions',
    `/ops/suppressions?client=${client.clientId}&tenant=shop`,
    `/ops/suppressions?client=${client.clientId}&address=ann%40example.com`,
    `/ops/suppressions?client=${client.clientId}&tenant=shop&channel=fax`,
    `/ops/suppressions/remove?client=${client.clientId}&tenant=shop&channel=sms&address=%2B15551230000&scope=*`,
  ];
  for (const path of pages) {
    await page.goto(con.ensUrl + path);
    const violations = await audit(page);
    t.same(
      violations.map(
        (v) =>
          `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
      ),
      [],
      `${path}: no violations`,
    );
  }
});

t.test('the notice page a user without rights sees passes too', async (t) => {
  const { page } = await con.signedIn(t, 'bob@example.com');
  t.same(
    (await audit(page)).map((v) => v.id),
    [],
    'notice page: no violations',
  );
});

t.test(
  'keyboard: the first Tab reaches "Skip to content", which moves focus into the main content',
  async (t) => {
    const { page } = await con.signedIn(t, 'ada@example.com');
    await page.keyboard.press('Tab');
    t.equal(await page.evaluate('document.activeElement?.textContent?.trim()'), 'Skip to content');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    const inMain = await page.evaluate(`Boolean(document.activeElement?.closest('main'))`);
    t.ok(inMain, 'the next Tab lands inside <main>');
  },
);
