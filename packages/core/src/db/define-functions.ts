import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { DbClient } from './pool.ts';

/** Each overload of a function name in the current schema: its signature, and its row version. */
async function overloads(c: DbClient, name: string): Promise<Map<string, string>> {
  const r = await c.query<{ sig: string; version: string }>(
    `SELECT oid::regprocedure::text AS sig, xmin::text AS version FROM pg_proc
      WHERE proname = $1 AND pronamespace = current_schema()::regnamespace`,
    [name],
  );
  return new Map(r.rows.map((row) => [row.sig, row.version]));
}

async function drop(c: DbClient, sigs: Iterable<string>): Promise<void> {
  for (const sig of sigs) await c.query(`DROP FUNCTION ${sig}`);
}

/**
 * Defines every function from its file in `dir`: `<name>.sql` holds one `CREATE OR REPLACE
 * FUNCTION <name>`. Runs inside the caller's transaction, so a failure leaves every function as it
 * was. The files are the only definition of these functions, so the database ends with exactly
 * what they say: an overload of the same name that the file no longer defines (an old parameter
 * list) is dropped, and a change that CREATE OR REPLACE refuses to make in place (another return
 * type, renamed parameters) is made by dropping the function and creating it again. A function
 * whose signature is unchanged is replaced in place, so triggers and other objects that depend on
 * it keep working. Returns the names defined.
 */
export async function defineFunctions(c: DbClient, dir: string): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const names: string[] = [];
  for (const file of files) {
    const name = file.slice(0, -'.sql'.length);
    const sql = await readFile(path.join(dir, file), 'utf8');
    const before = await overloads(c, name);
    await c.query('SAVEPOINT define_function');
    try {
      await c.query(sql);
    } catch (e) {
      // 42P13 invalid_function_definition: what CREATE OR REPLACE cannot change in place.
      if ((e as { code?: string }).code !== '42P13')
        throw new Error(`function ${file} failed: ${(e as Error).message}`, { cause: e });
      await c.query('ROLLBACK TO SAVEPOINT define_function');
      await drop(c, before.keys());
      await c.query(sql);
    }
    await c.query('RELEASE SAVEPOINT define_function');
    // A row this file wrote has a new version (xmin), whether created or replaced in place.
    const after = await overloads(c, name);
    const defined = [...after]
      .filter(([sig, version]) => before.get(sig) !== version)
      .map(([sig]) => sig);
    if (defined.length !== 1)
      throw new Error(
        `function ${file} must define exactly one function named ${name}; it defined ${defined.length}`,
      );
    await drop(
      c,
      [...after.keys()].filter((sig) => sig !== defined[0]),
    );
    names.push(name);
  }
  return names;
}
