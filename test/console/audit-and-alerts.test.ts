import t from 'tap';
import pg from 'pg';
import { callbackUrlSql } from '@ens/core/internal';
import { screenshot } from '../harness/browser.ts';
import { startReceiver } from '../harness/receiver.ts';
import { smsHandoff, uniqueKey, waitFor, type Teardown } from '../harness/service.ts';
import { AlertStore } from '../../services/ops/src/alerts/alert-store.ts';
import { AuditLog } from '../../services/ops/src/staff/audit-log.ts';
import { checkRulesMatch, type WatchedValue } from '../../services/ops/src/alerts/rule-match.ts';
import { pageText, startConsole, textOf } from './setup.ts';

/**
 * The audit log and the alerts list in Chromium (issue 25): the audit log shows a client's name
 * instead of only its id and a detail in words instead of JSON, counts its entries, and filters
 * by actor, action and time; an alert rule whose event type matches nothing is "no data", not a
 * green "ok", and the rules of a page are checked for data in one statement per scope, however
 * many they are; a dead-letter group's rows name the recipient and reference, not only ids; every
 * list says how many it has (the deliveries search, clients, a client's tenants, a handoff's other
 * deliveries, alert rules and their history, dead-letter groups and a group's dead letters).
 */

const con = await startConsole(t);
const { svc } = con;
const db = svc.rt.db;

const shop = await svc.createClient({ name: 'Acme Shop' });
await svc.tenant(shop, 'shop');
const r = await svc.send(
  shop,
  {
    tenant: 'shop',
    event_type: 'order.shipped',
    messages: [
      { channel: 'sms', recipients: ['+15551232222'], content: { kind: 'rendered', body: 'hi' } },
    ],
  },
  uniqueKey('audit'),
);
if (r.status !== 202) throw new Error(`send failed: ${r.status} ${r.text}`);
await waitFor(
  async () =>
    (await db.query(`SELECT 1 FROM deliveries WHERE status <> 'pending'`)).rows.length > 0,
  30_000,
  'the send to end',
);

t.test('audit log: names, readable details, and a filter', async (t) => {
  const audit = new AuditLog(db);
  await audit.write({
    actor: 'grace@example.com',
    action: 'client.limits',
    target: shop.clientId,
    detail: { rate_limit: 50, daily_quota: { sms: 1000 } },
  });
  await audit.write({ actor: 'cli', action: 'client.disable', target: shop.clientId, detail: {} });
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/audit');
  await screenshot(page, 'rough-audit');
  const row = page.locator('#audit tbody tr[data-action="client.limits"]').first();
  const text = (await row.textContent()) ?? '';
  t.match(text, 'Acme Shop', 'the target client by its name');
  t.notMatch(text, '{"', 'no raw JSON');
  t.match(text, /rate limit\s*50/i, 'details as words');
  t.match(await pageText(page), /\d+ entr(y|ies)/, 'a total');

  await page.goto(`${con.ensUrl}/ops/audit?actor=grace%40example.com`);
  const actors = await page
    .locator('#audit tbody tr[data-action]')
    .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-actor')));
  t.ok(actors.length >= 1 && actors.every((a) => a === 'grace@example.com'), 'filtered by actor');
  await page.goto(`${con.ensUrl}/ops/audit?action=client.disable`);
  const actions = await page
    .locator('#audit tbody tr[data-action]')
    .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-action')));
  t.ok(actions.length >= 1 && actions.every((a) => a === 'client.disable'), 'filtered by action');
  await page.goto(`${con.ensUrl}/ops/audit?since=2999-01-01T00:00`);
  t.equal(await page.locator('#audit tbody tr[data-action]').count(), 0, 'filtered by time');
  const bad = await page.goto(`${con.ensUrl}/ops/audit?since=2026-02-30T00:00`);
  t.equal(bad?.status(), 400, 'a time that does not exist is a 400');
});

t.test('alerts: a rule that matches nothing is "no data", not "ok"', async (t) => {
  const store = new AlertStore(db);
  const common = {
    scope: 'event_type' as const,
    window_minutes: 15,
    min_volume: 1,
    threshold_percent: 99,
    destination_kind: 'email' as const,
    destination: 'ops@example.com',
  };
  const none = await store.create({ ...common, name: 'Typo rule', value: 'order.shiped' }, 'ada');
  const real = await store.create({ ...common, name: 'Real rule', value: 'order.shipped' }, 'ada');
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/alerts');
  await screenshot(page, 'rough-alerts');
  const state = async (id: string) =>
    ((await page.locator(`#alert-rules tr[data-rule-id="${id}"] td`).nth(4).textContent()) ?? '')
      .replace(/\s+/g, ' ')
      .trim();
  t.match(await state(none.id), /no data/, 'the typo rule says no data');
  t.notMatch(await state(none.id), /\bok\b/);
  t.match(await state(real.id), /\bok\b/, 'a rule with traffic is ok');
});

t.test("a dead-letter group's rows show the recipient and the reference", async (t) => {
  const down = await startReceiver(t, [500]);
  const sent = await svc.send(
    shop,
    {
      tenant: 'shop',
      event_type: 'order.shipped',
      reference: 'order-4711',
      callback_url: down.url,
      messages: [
        { channel: 'sms', recipients: ['+15551233333'], content: { kind: 'rendered', body: 'x' } },
      ],
    },
    uniqueKey('dead'),
  );
  t.equal(sent.status, 202);
  await waitFor(
    async () => (await db.query(`SELECT 1 FROM callbacks WHERE status = 'dead'`)).rows.length > 0,
    30_000,
    'a dead letter',
  );
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/dead-letters');
  await page.locator('a[href^="/ops/dead-letters/group/"]').first().click();
  await page.waitForURL(/\/ops\/dead-letters\/group\//);
  await screenshot(page, 'rough-dead-letter-group');
  const row =
    (await page.locator('#dead-letters tbody tr[data-callback-id]').first().textContent()) ?? '';
  t.match(row, '+15551233333', 'the recipient');
  t.match(row, 'order-4711', 'the reference');
});

t.test('the deliveries search and the clients list show a total', async (t) => {
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/deliveries?tenant=shop');
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM deliveries WHERE tenant = 'shop'`,
  );
  t.match(
    (await page.locator('#delivery-count').textContent()) ?? '',
    new RegExp(`^${rows[0]!.n} deliver(y matches|ies match)`),
    'the search counts its matches',
  );
  await page.goto(`${con.ensUrl}/ops/clients`);
  const clients = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM clients WHERE deleted_at IS NULL',
  );
  t.match(
    (await page.locator('#client-count').textContent()) ?? '',
    new RegExp(`^${clients.rows[0]!.n} clients?`),
    'the clients list counts them',
  );
});

/**
 * A pool on the test's database that counts the statements its clients run, BEGIN, SET LOCAL,
 * COMMIT and ROLLBACK aside: what a check costs in round trips, whatever it does inside each.
 */
function countingPool(t: Teardown): { db: pg.Pool; lookups: () => number; reset: () => void } {
  const db = new pg.Pool({ connectionString: svc.engines.databaseUrl, max: 4 });
  t.teardown(() => db.end());
  let n = 0;
  const wrapped = new WeakSet<pg.PoolClient>();
  db.on('acquire', (client) => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    const query = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args) => {
      const text = typeof args[0] === 'string' ? args[0] : '';
      if (!/^\s*(BEGIN|COMMIT|ROLLBACK|SET LOCAL)\b/i.test(text)) n++;
      return query(...args);
    };
  });
  return {
    db,
    lookups: () => n,
    reset: () => {
      n = 0;
    },
  };
}

t.test('alerts: rules with and without data are judged in one statement per scope', async (t) => {
  // A second event type with a delivery of the last day; order.shipped has one since the start.
  const sent = await svc.send(
    shop,
    smsHandoff('shop', ['+15551234444'], { event_type: 'refund.issued' }),
    uniqueKey('refund'),
  );
  t.equal(sent.status, 202);
  const rules: (WatchedValue & { data: boolean })[] = [
    { scope: 'event_type', value: 'order.shipped', data: true },
    { scope: 'event_type', value: 'order.shipd', data: false },
    { scope: 'event_type', value: 'refund.issued', data: true },
    { scope: 'event_type', value: 'never.sent', data: false },
    { scope: 'tenant', value: 'shop', data: true },
    { scope: 'tenant', value: 'shpo', data: false },
  ];
  const counted = countingPool(t);
  const judged = await checkRulesMatch(counted.db, rules);
  t.same(
    judged.map((m) => m.matches),
    rules.map((r) => r.data),
    'each rule judged right, in the order asked',
  );
  t.equal(counted.lookups(), 2, 'one statement for the event types, one for the tenants');
  const many: WatchedValue[] = [
    ...rules,
    ...Array.from({ length: 40 }, (_, i) => ({ scope: 'event_type' as const, value: `typo.${i}` })),
    ...Array.from({ length: 10 }, (_, i) => ({ scope: 'tenant' as const, value: `nobody-${i}` })),
  ];
  counted.reset();
  const judgedMany = await checkRulesMatch(counted.db, many);
  t.equal(counted.lookups(), 2, '56 rules: still two statements');
  t.same(
    judgedMany.map((m) => m.matches),
    many.map((_, i) => (i < rules.length ? rules[i]!.data : false)),
    'and each judged right',
  );
  t.same(await checkRulesMatch(counted.db, []), [], 'no rule, no statement');

  // The alerts page: "no data" exactly on the rules without data.
  const store = new AlertStore(db);
  const ids = new Map<string, boolean>();
  for (const r of rules) {
    const made = await store.create(
      {
        name: `Watch ${r.value}`,
        scope: r.scope,
        value: r.value,
        window_minutes: 15,
        min_volume: 1,
        threshold_percent: 99,
        destination_kind: 'email',
        destination: 'ops@example.com',
      },
      'ada',
    );
    ids.set(made.id, r.data);
  }
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/alerts');
  for (const [id, data] of ids) {
    const state = await textOf(page.locator(`#alert-rules tr[data-rule-id="${id}"] td`).nth(4));
    t.equal(/no data/.test(state), !data, `rule ${id}: ${data ? 'ok' : 'no data'} (${state})`);
  }
});

t.test('every list says how many it has', async (t) => {
  // Alert rules past a page (50), and a history of firings.
  await db.query(
    `INSERT INTO alert_rules (name, scope, value, window_minutes, min_volume, threshold_percent, destination_kind, destination, created_by)
     SELECT 'Bulk ' || g, 'tenant', 'shop', 15, 1000000, 99, 'email', 'ops@example.com', 'test' FROM generate_series(1, 50) g`,
  );
  await db.query(
    `INSERT INTO alert_firings (rule_id, started_at, resolved_at, total, failed, rate_percent)
     SELECT id, now() - interval '2 hours', now() - interval '1 hour', 10, 5, 50 FROM alert_rules WHERE name LIKE 'Bulk %' LIMIT 3`,
  );
  const count = async (sql: string) => (await db.query<{ n: number }>(sql)).rows[0]!.n;
  const rules = await count('SELECT count(*)::int AS n FROM alert_rules');
  const firings = await count('SELECT count(*)::int AS n FROM alert_firings');
  const { page } = await con.signedIn(t, 'ada@example.com', '/ops/alerts');
  await screenshot(page, 'totals-alerts');
  t.equal(
    await textOf(page.locator('#rule-count')),
    `Showing 50 of ${rules} rules.`,
    'the rules: a page of the total',
  );
  t.equal(await page.locator('#alert-rules tr[data-rule-id]').count(), 50, '(a page of 50)');
  t.equal(
    await textOf(page.locator('#firings-count')),
    `${firings} ${firings === 1 ? 'firing' : 'firings'}.`,
    'the history',
  );

  // Dead-letter groups and one group's dead letters (the dead letter made by the test above).
  const groups = await count(
    `SELECT count(DISTINCT (client_id, ${callbackUrlSql('callbacks')}, last_error))::int AS n FROM callbacks WHERE status = 'dead'`,
  );
  t.ok(groups >= 1, '(a dead letter to count)');
  await page.goto(`${con.ensUrl}/ops/dead-letters`);
  t.equal(
    await textOf(page.locator('#groups-count')),
    `${groups} ${groups === 1 ? 'group' : 'groups'}.`,
    'the dead-letter groups',
  );
  await page.locator('a[href^="/ops/dead-letters/group/"]').first().click();
  await page.waitForURL(/\/ops\/dead-letters\/group\//);
  const inGroup = await textOf(page.locator('#group-count'));
  t.equal(
    await textOf(page.locator('#dead-letter-count')),
    `${inGroup} ${inGroup === '1' ? 'dead letter' : 'dead letters'}.`,
    "a group's dead letters",
  );

  // A client's tenants.
  await page.goto(`${con.ensUrl}/ops/clients/${shop.clientId}`);
  t.equal(await textOf(page.locator('#tenant-count')), '1 tenant.', "the client's tenants");

  // A handoff's other deliveries.
  const three = await svc.send(
    shop,
    smsHandoff('shop', ['+15551235550', '+15551235551', '+15551235552'], {
      event_type: 'order.shipped',
    }),
    uniqueKey('three'),
  );
  t.equal(three.status, 202);
  const first = (three.body.deliveries as { delivery_id: string }[])[0]!.delivery_id;
  await page.goto(`${con.ensUrl}/ops/deliveries/${first}`);
  t.equal(
    await textOf(page.locator('#handoff-count')),
    '2 other deliveries.',
    "a handoff's other deliveries",
  );
});
