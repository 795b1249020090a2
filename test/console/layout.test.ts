import t from 'tap';
import type { Page } from 'playwright-core';
import { callbackUrlSql } from '@ens/core/internal';
import { screenshot } from '../harness/browser.ts';
import { startReceiver } from '../harness/receiver.ts';
import { uniqueKey, waitFor } from '../harness/service.ts';
import { startConsole } from './setup.ts';

/**
 * Every console page reads fully at 1,280 px and stays usable at 1,024 px, measured in Chromium
 * with data made to break a layout: long URLs, long errors, long recipients, references, event
 * types and tenant names, a delivery with many attempts, many dead letters. At both widths the
 * page never scrolls sideways; at 1,280 no table needs to; at 1,024 a table may, but only inside
 * its own scrolling region; and no row of a table is taller than three lines. Each page is saved
 * to test-artifacts/console/layout-<page>-<width>.png.
 */

const con = await startConsole(t);
const { svc, ensUrl } = con;
const db = svc.rt.db;

// --- data that breaks layouts ----------------------------------------------------------------
const LONG = (label: string, n: number) =>
  `${label}-${'x'.repeat(Math.max(0, n - label.length - 1))}`;
const client = await svc.createClient({
  name: 'Northwind Traders International Holdings (EMEA payments and notifications)',
  callbackSecret: true,
});
const tenant = LONG('tenant-with-a-very-long-name-for-a-regional-subsidiary', 120);
await svc.tenant(client, tenant);
const receiver = await startReceiver(t, [500]);
const longUrl = `${receiver.url}/${'webhooks/v3/notifications/'.repeat(12)}delivery-status?signature=${'ab12'.repeat(40)}&tenant=${tenant}`;
const eventType = LONG('customer.account.notification.preferences.updated', 190);
const reference = LONG('order-2026-11-25-EMEA-0000012345-shipment-confirmation', 190);
const r = await svc.send(
  client,
  {
    tenant,
    event_type: eventType,
    reference,
    callback_url: longUrl,
    messages: [
      {
        channel: 'sms',
        recipients: ['+15551230000', '+15551230001', '+15551231111'],
        content: { kind: 'rendered', body: 'Your order shipped' },
      },
      {
        channel: 'email',
        recipients: [
          `${'a.very.long.local.part.'.repeat(5)}customer@${'subdomain.'.repeat(6)}example.com`,
          'fail@example.com',
        ],
        content: { kind: 'rendered', subject: 'Shipped', body: 'Your order shipped.' },
      },
    ],
  },
  uniqueKey('layout'),
);
if (r.status !== 202) throw new Error(`send failed: ${r.status} ${r.text}`);
const deliveries = r.body.deliveries as {
  delivery_id: string;
  channel: string;
  recipient: string;
}[];
await waitFor(
  async () => {
    const { rows } = await db.query(
      `SELECT (SELECT count(*)::int FROM deliveries WHERE status = 'pending') AS pending, (SELECT count(*)::int FROM callbacks WHERE status = 'pending') AS backlog`,
    );
    return rows[0].pending === 0 && rows[0].backlog === 0;
  },
  30_000,
  'every delivery ended and every callback delivered or dead',
);

// Errors as long as providers and receivers write them, and a delivery retried many times.
const longError = `provider answered HTTP 503 Service Unavailable: upstream connect error or disconnect/reset before headers. reset reason: connection termination; ${'retry-after advice ignored; '.repeat(12)}request id 7f3c9a`;
const many = deliveries[0]!.delivery_id;
await db.query(`UPDATE deliveries SET last_error = $1, attempts = 14 WHERE id = ANY($2::uuid[])`, [
  longError,
  deliveries.map((d) => d.delivery_id),
]);
await db.query(
  `INSERT INTO attempts (delivery_id, number, provider, started_at, finished_at, outcome, error)
                SELECT $1, n, '@ens/plugin-sandbox', now() - (20 - n) * interval '1 second', now() - (20 - n) * interval '1 second' + interval '120 milliseconds', 'transient', $2
                  FROM generate_series(10, 23) n`,
  [many, longError],
);
await db.query(`UPDATE callbacks SET last_error = $1 WHERE status = 'dead'`, [longError]);
const { rows: deadRows } = await db.query(
  `SELECT count(*)::int AS n FROM callbacks WHERE status = 'dead'`,
);
if (deadRows[0].n < 3)
  throw new Error(`expected dead letters with a long URL, got ${deadRows[0].n}`);
const group = (
  await db.query(
    `SELECT md5(client_id || E'\\n' || ${callbackUrlSql('callbacks')} || E'\\n' || coalesce(last_error, E'\\x01')) AS key FROM callbacks WHERE status = 'dead' LIMIT 1`,
  )
).rows[0].key as string;

// An alert rule with long values, and an audit trail.
await db.query(
  `INSERT INTO alert_rules (name, scope, value, window_minutes, min_volume, threshold_percent, destination_kind, destination, created_by)
                VALUES ($1, 'event_type', $2, 60, 1, 5, 'webhook', $3, 'ada@example.com')`,
  [LONG('EMEA payments: failure rate of account notifications', 180), eventType, longUrl],
);
const ruleId = (await db.query('SELECT id::text FROM alert_rules LIMIT 1')).rows[0].id as string;
await db.query(
  `INSERT INTO audit_log (actor, action, target, detail) VALUES ('cli', 'client.limits', $1, $2)`,
  [
    client.clientId,
    JSON.stringify({
      rate_limit: 100,
      daily_quota: { sms: 100000, email: 250000, push: null, whatsapp: 5000 },
      note: longError,
    }),
  ],
);

// Consent with long values: addresses, scopes (event types), evidence, who added it; a bounce and a
// complaint on an email delivery (the dashboard's rates, the delivery's reports).
const longEmail = deliveries.find((d) => d.channel === 'email' && !d.recipient.startsWith('fail'))!;
await svc.rt.suppressions.upsert(client.clientId, [
  {
    tenant,
    channel: 'email',
    address: longEmail.recipient,
    scope: eventType,
    reason: 'opt_out',
    source: 'unsubscribe',
    deliveryId: longEmail.delivery_id,
    detail: longError,
  },
  {
    tenant,
    channel: 'sms',
    address: '+15551230000',
    reason: 'invalid_recipient',
    source: 'provider',
    provider: '@ens/plugin-sandbox',
    deliveryId: deliveries[0]!.delivery_id,
    detail: longError,
  },
  {
    tenant,
    channel: 'email',
    address: `${'someone.with.a.long.name.'.repeat(4)}x@example.com`,
    reason: 'manual',
    source: 'console',
    detail: longError,
    createdBy: `${'operations.engineer.'.repeat(3)}on.call@example.com`,
  },
]);
await svc.rt.suppressions.reportForDelivery(
  { deliveryId: longEmail.delivery_id },
  { kind: 'hard_bounce', source: 'bounce_mail', detail: longError, at: new Date() },
);
await db.query(`UPDATE deliveries SET complained_at = now() WHERE id = $1`, [
  longEmail.delivery_id,
]);

const PAGES: [string, string][] = [
  ['dashboard', '/ops/'],
  ['deliveries', '/ops/deliveries'],
  ['delivery', `/ops/deliveries/${many}`],
  ['clients', '/ops/clients'],
  ['client', `/ops/clients/${client.clientId}`],
  [
    'suppressions',
    `/ops/suppressions?client=${client.clientId}&tenant=${encodeURIComponent(tenant)}`,
  ],
  [
    'suppressions-across',
    `/ops/suppressions?client=${client.clientId}&address=${encodeURIComponent(longEmail.recipient)}`,
  ],
  [
    'suppression-remove',
    `/ops/suppressions/remove?client=${client.clientId}&tenant=${encodeURIComponent(tenant)}&channel=email&address=${encodeURIComponent(longEmail.recipient)}&scope=${encodeURIComponent(eventType)}`,
  ],
  ['delivery-bounced', `/ops/deliveries/${longEmail.delivery_id}`],
  ['dead-letters', '/ops/dead-letters'],
  ['dead-letter-group', `/ops/dead-letters/group/${group}`],
  ['alerts', '/ops/alerts'],
  ['alert-rule', `/ops/alerts/${ruleId}`],
  ['audit', '/ops/audit'],
];

interface Layout {
  scrollWidth: number;
  innerWidth: number;
  /** Tables whose region has to scroll sideways to show them whole. */
  scrolling: string[];
  /** Cells outside the window and not inside a table's own scrolling region. */
  outside: string[];
  /** Rows taller than three lines. */
  tall: string[];
  tables: number;
}

// A string, not a function: this file is compiled without the DOM library.
const MEASURE = `(() => {
  const vw = window.innerWidth;
  const out = { scrollWidth: document.documentElement.scrollWidth, innerWidth: vw, scrolling: [], outside: [], tall: [], tables: 0 };
  const name = (table) => table.id || (table.caption ? table.caption.textContent.trim().slice(0, 40) : 'table');
  for (const table of document.querySelectorAll('table')) {
    if (table.getBoundingClientRect().width === 0) continue; // inside a closed <details>
    out.tables++;
    const wrap = table.parentElement;
    const region = wrap && wrap.classList.contains('table-scroll') && ['auto', 'scroll'].includes(getComputedStyle(wrap).overflowX) ? wrap : null;
    if (region && region.scrollWidth > region.clientWidth + 1) out.scrolling.push(name(table));
    for (const cell of table.querySelectorAll('th, td')) {
      const c = cell.getBoundingClientRect();
      if (c.width === 0) continue;
      if ((c.left < -1 || c.right > vw + 1) && !region) out.outside.push(name(table) + ': ' + cell.textContent.trim().slice(0, 30));
    }
    for (const row of table.querySelectorAll('tbody tr')) {
      const cell = row.querySelector('td, th');
      if (!cell) continue;
      const style = getComputedStyle(cell);
      const line = parseFloat(style.lineHeight);
      const padding = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);
      const h = row.getBoundingClientRect().height;
      if (h > 3 * line + padding + 6) out.tall.push(name(table) + ' row ' + Math.round(h) + 'px (3 lines: ' + Math.round(3 * line + padding) + 'px): ' + row.textContent.trim().replace(/\\s+/g, ' ').slice(0, 50));
    }
  }
  return out;
})()`;

async function measure(page: Page): Promise<Layout> {
  return (await page.evaluate(MEASURE)) as Layout;
}

for (const [width, height] of [
  [1280, 800],
  [1024, 768],
] as const) {
  t.test(`every console page at ${width}×${height}`, async (t) => {
    const { page } = await con.signedIn(t, 'ada@example.com');
    await page.setViewportSize({ width, height });
    for (const [name, path] of PAGES) {
      const res = await page.goto(ensUrl + path);
      t.equal(res?.status(), 200, `${name}: 200`);
      const m = await measure(page);
      await screenshot(page, `layout-${name}-${width}`);
      if (name !== 'alert-rule' && name !== 'suppression-remove')
        t.ok(m.tables > 0, `${name}: has tables to measure (${m.tables})`);
      t.ok(
        m.scrollWidth <= m.innerWidth,
        `${name}: the page does not scroll sideways (scrollWidth ${m.scrollWidth} ≤ ${m.innerWidth})`,
      );
      t.same(
        m.outside,
        [],
        `${name}: every cell is in the window or in its table's scrolling region`,
      );
      t.same(m.tall, [], `${name}: no row taller than three lines`);
      if (width === 1280)
        t.same(m.scrolling, [], `${name}: at 1,280 px every table reads fully, no sideways scroll`);
    }
  });
}
