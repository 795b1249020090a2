import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db } from './pool.ts';

/**
 * Where the .sql files live: next to this module in the source tree; next to the bundle
 * (`dist/migrations`, copied by the build) when running built code.
 */
function migrationsDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.join(here, 'migrations');
}

/**
 * Applies every migration not yet applied, in name order, each in its own transaction, under an
 * advisory lock so several processes starting at once apply each migration exactly once.
 * Returns the names it applied.
 */
export async function migrate(db: Db): Promise<string[]> {
  const dir = migrationsDir();
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const applied: string[] = [];
  const c = await db.connect();
  try {
    await c.query('SELECT pg_advisory_lock(7466001)');
    await c.query('CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set((await c.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
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
  } finally {
    await c.query('SELECT pg_advisory_unlock(7466001)').catch(() => {});
    c.release();
  }
  return applied;
}
