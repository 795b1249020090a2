import t, { type Test } from 'tap';
import pg from 'pg';
import { migrate, SuppressionStore, type SuppressionQuery } from '@ens/core';
import { startTestEngines } from '../harness/engines.ts';

/**
 * The suppression list is designed for millions of entries per tenant: every statement the API and
 * the CLI run against it is a look-up by key or a walk of the primary key (client, tenant, channel,
 * address, scope), never a scan or a sort of the tenant's list. Checked here on the statements the
 * store really sends (captured, then EXPLAINed with their own parameters) over 100,000 rows in the
 * tenant and as many in another.
 */

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

const nodes = (p: PlanNode): PlanNode[] => [p, ...(p.Plans ?? []).flatMap(nodes)];

t.test('list pages, filters and the look-up of one address walk the primary key', async (t) => {
  const engines = await startTestEngines(t);
  const db = new pg.Pool({ connectionString: engines.databaseUrl, max: 2 });
  // Idle connections see the server stop at teardown: not this test's failure.
  db.on('error', () => {});
  t.teardown(() => db.end());
  await migrate(db);
  await db.query(`INSERT INTO clients (id, name, secret_hash) VALUES ('plans', 'plans', 'x')`);
  await db.query(`INSERT INTO tenants (client_id, id) VALUES ('plans', 'big'), ('plans', 'other')`);
  // 100,000 entries in tenant big (sms and email, four reasons, some scoped), and as many in
  // another.
  for (const tenant of ['big', 'other']) {
    await db.query(
      `INSERT INTO suppressions (client_id, tenant, channel, address, scope, reason, source)
       SELECT 'plans', $1, CASE WHEN i % 3 = 0 THEN 'email' ELSE 'sms' END,
              CASE WHEN i % 3 = 0 THEN 'user' || i || '@example.com' ELSE '+1555' || lpad(i::text, 7, '0') END,
              CASE WHEN i % 10 = 0 THEN 'newsletter.weekly' ELSE '*' END,
              (ARRAY['hard_bounce', 'complaint', 'opt_out', 'manual'])[1 + i % 4], 'import'
         FROM generate_series(1, 100000) AS i`,
      [tenant],
    );
  }
  await db.query('ANALYZE suppressions');

  // The store's own statements, caught on their way to PostgreSQL.
  let caught: { text: string; values: unknown[] } | null = null;
  const spy = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return (text: string, values: unknown[]) => {
        caught = { text, values };
        return target.query(text, values);
      };
    },
  });
  const store = new SuppressionStore(spy, { softBounceHoldMs: 86_400_000 });

  const plan = async (): Promise<PlanNode[]> => {
    const c = caught!;
    caught = null;
    const r = await db.query(`EXPLAIN (FORMAT JSON) ${c.text}`, c.values);
    return nodes((r.rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan);
  };
  const walksThePrimaryKey = (t: Test, all: PlanNode[], what: string) => {
    const onTable = all.filter(
      (n) => n['Relation Name'] === 'suppressions' && n['Node Type'] !== 'ModifyTable',
    );
    t.ok(
      onTable.length === 1 &&
        /Index( Only)? Scan/.test(onTable[0]!['Node Type']) &&
        onTable[0]!['Index Name'] === 'suppressions_pkey',
      `${what}: an index scan of suppressions_pkey (${all.map((n) => `${n['Node Type']}${n['Index Name'] ? ` on ${n['Index Name']}` : ''}`).join(' > ')})`,
    );
    t.notOk(
      all.some(
        (n) =>
          n['Node Type'] === 'Sort' ||
          n['Node Type'] === 'Seq Scan' ||
          n['Node Type'].startsWith('Bitmap'),
      ),
      `${what}: no sort, no sequential or bitmap scan`,
    );
  };

  const first = await store.list('plans', 'big', { limit: 1000 });
  t.equal(first.results.length, 1000);
  walksThePrimaryKey(t, await plan(), 'the first page');

  const cursor = first.next_cursor!;
  const second = await store.list('plans', 'big', { limit: 1000, cursor });
  t.equal(second.results.length, 1000);
  const after = await plan();
  walksThePrimaryKey(t, after, 'a page after a cursor');
  const bound = after.find((n) => n['Relation Name'] === 'suppressions')?.['Index Cond'] ?? '';
  t.match(
    bound,
    /ROW\(channel, address, scope\) >/,
    `the cursor starts the index scan where the page before ended, not at the tenant's first entry: ${bound}`,
  );

  const cases: [string, SuppressionQuery][] = [
    ['filtered by reason', { limit: 1000, reason: 'complaint' }],
    ['filtered by channel', { limit: 1000, channel: 'email' }],
    [
      'filtered by channel and reason, after a cursor',
      { limit: 1000, channel: 'sms', reason: 'opt_out', cursor },
    ],
    ['one address (every scope)', { limit: 1000, channel: 'sms', address: '+15550000010' }],
    [
      'one email address, given in another case',
      { limit: 1000, channel: 'email', address: 'USER30@Example.COM' },
    ],
  ];
  for (const [what, q] of cases) {
    const page = await store.list('plans', 'big', q);
    t.ok(page.results.length > 0, `${what}: found entries`);
    walksThePrimaryKey(t, await plan(), what);
  }
  const one = await store.list('plans', 'big', {
    limit: 1000,
    channel: 'sms',
    address: '+15550000010',
  });
  t.same(
    one.results.map((e) => e.scope),
    ['newsletter.weekly'],
    'the address found by key',
  );

  // The look-up of one address is an equality on the whole key prefix: an index condition on all
  // four.
  await store.list('plans', 'big', {
    limit: 1000,
    channel: 'email',
    address: 'user30@example.com',
  });
  const scan = (await plan()).find((n) => n['Relation Name'] === 'suppressions');
  t.match(
    scan?.['Index Cond'] ?? '',
    /client_id.*tenant.*channel.*address/,
    `the index condition holds the whole key prefix: ${scan?.['Index Cond']}`,
  );

  // remove() ran its DELETE … RETURNING; EXPLAIN without ANALYZE reads its plan without running it
  // again.
  const removed = await store.remove('plans', 'big', 'sms', '+15550000011');
  t.equal(removed.length, 1);
  walksThePrimaryKey(t, await plan(), 'removing one address');
});
