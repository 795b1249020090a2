import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineFunctions } from './define-functions.ts';
import { withClient, type Db } from './pool.ts';

/**
 * Where the .sql files of `kind` live: next to this module in the source tree; next to the bundle
 * (`dist/migrations`, `dist/functions`, copied by the build) when running built code.
 */
function sqlDir(kind: 'migrations' | 'functions'): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.join(here, kind);
}

/**
 * Applies every migration not yet applied, in name order, each in its own transaction, then
 * defines every function again from its file (see defineFunctions), in one transaction. Migrations
 * hold the data's shape and run once; functions hold code, so a changed file takes effect on the
 * next run without a migration (and a migration cannot rely on one: on a new database they are
 * defined after it). All of it under an advisory lock, so several processes starting at
 * once apply each migration exactly once. Returns the names of the migrations it applied.
 */
export async function migrate(db: Db): Promise<string[]> {
  const dir = sqlDir('migrations');
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const applied: string[] = [];
  await withClient(db, async (c) => {
    try {
      await c.query('SELECT pg_advisory_lock(7466001)');
      await c.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at ' +
          'timestamptz NOT NULL DEFAULT now())',
      );
      const done = new Set(
        (await c.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map(
          (r) => r.name,
        ),
      );
      for (const f of files) {
        if (done.has(f)) continue;
        const sql = await readFile(path.join(dir, f), 'utf8');
        await c.query('BEGIN');
        try {
          await c.query(sql);
          await c.query('INSERT INTO schema_migrations (name) VALUES ($1)', [f]);
          await c.query('COMMIT');
        } catch (e) {
          await c.query('ROLLBACK');
          throw new Error(`migration ${f} failed: ${(e as Error).message}`, { cause: e });
        }
        applied.push(f);
      }
      await c.query('BEGIN');
      try {
        await defineFunctions(c, sqlDir('functions'));
        await c.query('COMMIT');
      } catch (e) {
        await c.query('ROLLBACK');
        throw e;
      }
    } finally {
      await c.query('SELECT pg_advisory_unlock(7466001)').catch(() => {});
    }
  });
  return applied;
}
