import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { root, sourceFiles, workspaces } from './workspace-graph.ts';

/**
 * All SQL against the delivery tables lives in core's store (issue 24): the transitions in
 * store/*.ts, the read models the console and others call in store/read-models/. So a change to
 * the record (a column, an index, a table split) is read in one folder, and the console cannot
 * drift from the record the API serves. Outside it only core's own machinery may name them: the
 * migrations and the accept function that define them, and the periodic jobs that remove what
 * retention and media collection let go (they delete by the tables' own rules, in core's
 * scheduler). Tests are free to read the tables to check them.
 */

/**
 * The tables of a delivery's life: its handoff, itself, its attempts and reports, its callbacks.
 */
export const DELIVERY_TABLES = [
  'handoffs',
  'deliveries',
  'attempts',
  'delivery_events',
  'callbacks',
  'callback_attempts',
  'idempotency_keys',
  'feed_clock',
] as const;

/** Where core may name them, relative to the repository (folders end with a slash). */
const ALLOWED = [
  'packages/core/src/store/',
  'packages/core/src/lifecycle/',
  'packages/core/src/db/migrations/',
  'packages/core/src/db/functions/',
  'packages/core/src/retention/retention-job.ts',
  'packages/core/src/media/media-collector.ts',
];

const stripComments = (text: string) =>
  text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*(\/\/|--).*$/gm, '');

const TABLE = `(?:ONLY\\s+)?(?:"?public"?\\.)?"?(${DELIVERY_TABLES.join('|')})"?\\b`;
/** A table right after a keyword that names one (SQL's keywords are written in capitals here). */
const AFTER_KEYWORD = new RegExp(
  `\\b(?:FROM|JOIN|UPDATE|INTO|TABLE|TRUNCATE|REFERENCES)\\s+${TABLE}`,
  'g',
);
/** A table later in a FROM list: `FROM handoffs h, deliveries d`. */
const IN_FROM_LIST = /\bFROM\s+\w+(?:\s+\w+)?(?:\s*,\s*\w+(?:\s+\w+)?)*/g;

interface Finding {
  file: string;
  table: string;
}

/** The delivery tables that SQL in `text` reads or writes. */
export function findingsIn(file: string, text: string): Finding[] {
  const code = stripComments(text);
  const tables = new Set<string>();
  for (const m of code.matchAll(AFTER_KEYWORD)) tables.add(m[1]!);
  for (const m of code.matchAll(IN_FROM_LIST)) {
    for (const item of m[0].replace(/^FROM\s+/, '').split(',')) {
      const name = item.trim().split(/\s+/)[0]!;
      if ((DELIVERY_TABLES as readonly string[]).includes(name)) tables.add(name);
    }
  }
  return [...tables].sort().map((table) => ({ file, table }));
}

const allowed = (rel: string) =>
  ALLOWED.some((a) => (a.endsWith('/') ? rel.startsWith(a) : rel === a));
const isTest = (rel: string) => rel.split('/').includes('test');

t.test("no SQL against the delivery tables outside core's store", async (t) => {
  const files = workspaces()
    .flatMap((w) => sourceFiles(w.dir))
    .map((f) => path.relative(root, f).split(path.sep).join('/'))
    .filter((rel) => !isTest(rel) && !allowed(rel));
  t.ok(files.length > 100, `${files.length} source files are scanned`);
  t.ok(
    files.some((f) => f.startsWith('services/ops/src/')),
    'the console is among them',
  );
  const found = files.flatMap((rel) => findingsIn(rel, readFileSync(path.join(root, rel), 'utf8')));
  t.same(found, [], 'each is a read model or a transition in packages/core/src/store/');
});

t.test('the store itself is read by the check', async (t) => {
  const feed = path.join(root, 'packages/core/src/store/feed.ts');
  t.ok(
    findingsIn('feed.ts', readFileSync(feed, 'utf8')).some((f) => f.table === 'deliveries'),
    "the feed's statements are found (so the patterns match this tree's SQL)",
  );
});

t.test('the check catches what it is for', async (t) => {
  const f = 'services/x/src/a.ts';
  t.same(findingsIn(f, "await db.query('SELECT id FROM deliveries WHERE id = $1', [id]);"), [
    { file: f, table: 'deliveries' },
  ]);
  t.same(
    findingsIn(
      f,
      'const sql = `SELECT count(*) FROM callbacks c\n  JOIN delivery_events e ON e.id = c.id`;',
    ),
    [
      { file: f, table: 'callbacks' },
      { file: f, table: 'delivery_events' },
    ],
  );
  t.same(findingsIn(f, '`UPDATE deliveries SET status = $2`'), [{ file: f, table: 'deliveries' }]);
  t.same(findingsIn(f, '`INSERT INTO attempts (delivery_id) VALUES ($1)`'), [
    { file: f, table: 'attempts' },
  ]);
  t.same(findingsIn(f, '`DELETE FROM ONLY public.handoffs WHERE id = $1`'), [
    { file: f, table: 'handoffs' },
  ]);
  t.same(findingsIn(f, '`SELECT 1 FROM clients cl, callbacks c WHERE c.client_id = cl.id`'), [
    { file: f, table: 'callbacks' },
  ]);
  t.same(
    findingsIn(
      f,
      [
        '// SELECT * FROM deliveries: the store does it now',
        "const detail = 'No delivery has this id: it was removed from deliveries by retention';",
        "await db.query('SELECT id FROM clients WHERE id = $1', [id]);",
        'const rows = await searchDeliveries(rt.db, filters);',
        "await db.query('SELECT * FROM delivery_eventsx');",
      ].join('\n'),
    ),
    [],
    'comments, prose, other tables and read-model calls are fine',
  );
  t.ok(allowed('packages/core/src/store/read-models/dashboard.ts'), 'the store is allowed');
  t.notOk(allowed('packages/core/src/backlog.ts'), 'the rest of core is not');
  t.notOk(allowed('services/ops/src/queries/summary.ts'), 'the console is not');
  t.ok(isTest('services/ops/test/views.test.ts'), "a test's own queries are not scanned");
});
