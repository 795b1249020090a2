import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { root, sourceFiles, workspaces } from './workspace-graph.ts';

/**
 * A client checked out of a pool emits 'error' when PostgreSQL goes away while none of its queries
 * waits, and an 'error' without a listener ends the process: a PostgreSQL kill while the
 * table-statistics job held its lock did (test/fault/postgres-killed-mid-session.test.ts). So
 * checking a client out is core's db/pool.ts's job (withClient, inTransaction), which listens;
 * the one other place is a LISTEN session that keeps its client for the process's life and
 * handles the client's errors itself.
 */
const ALLOWED = new Set([
  path.join('packages', 'core', 'src', 'db', 'pool.ts'),
  path.join('packages', 'core', 'src', 'store', 'client-directory.ts'),
]);

const stripComments = (text: string) =>
  text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/** Where `text` checks a client out of a pool: `<something>db.connect()` or `pool.connect()`. */
export function checkoutsIn(text: string): string[] {
  return [...stripComments(text).matchAll(/[\w$.]*\b(?:db|pool)\s*\.\s*connect\s*\(/gi)].map(
    (m) => m[0],
  );
}

t.test('clients are checked out only where their errors are listened to', async (t) => {
  const found: string[] = [];
  for (const w of workspaces())
    for (const f of sourceFiles(w.dir)) {
      const rel = path.relative(root, f);
      if (ALLOWED.has(rel) || rel.split(path.sep).includes('test')) continue;
      for (const c of checkoutsIn(readFileSync(f, 'utf8'))) found.push(`${rel}: ${c}`);
    }
  t.same(found, [], 'use withClient or inTransaction from db/pool.ts instead');
});

t.test('the check catches what it is for', async (t) => {
  t.same(checkoutsIn('const c = await deps.db.connect();'), ['deps.db.connect(']);
  t.same(checkoutsIn('const c = await this.pool.connect();'), ['this.pool.connect(']);
  t.same(checkoutsIn('const c = await rt.db.connect();'), ['rt.db.connect(']);
  t.same(
    checkoutsIn('// db.connect() is pool.ts\'s job\nawait withClient(db, (c) => c.query("x"));'),
    [],
  );
  t.same(checkoutsIn('await client.connect();'), [], "a client of one's own is not a checkout");
});
