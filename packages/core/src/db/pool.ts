import pg from 'pg';

export type Db = pg.Pool;
export type DbClient = pg.PoolClient;

/**
 * One pool per process. Timestamps are formatted by the SQL that reads them (microseconds
 * matter for the feed), so the driver's Date parsing is never relied on.
 */
export function createPool(url: string, opts: { max?: number; applicationName?: string; asyncCommit?: boolean } = {}): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 20,
    application_name: opts.applicationName ?? 'ens',
    idleTimeoutMillis: 30_000,
    // With PostgreSQL away, a request waiting for a connection gets an error (a 503) within this,
    // not a hang past its client's own timeout.
    connectionTimeoutMillis: 5_000,
    ...(opts.asyncCommit ? { options: '-c synchronous_commit=off' } : {}),
  });
  // An idle client losing its connection (PostgreSQL restart) must not crash the process; the
  // pool replaces it on next use.
  pool.on('error', () => {});
  return pool;
}

/**
 * A pool whose commits return before their WAL reaches disk, for bookkeeping that a PostgreSQL
 * crash may lose without harm: leases (a lost claim just expires) and callback attempt records (a
 * lost one means a re-post with the same webhook-id). Never for accepts, outcomes or the feed.
 */
export function createAsyncCommitPool(url: string, opts: { max?: number; applicationName?: string } = {}): Db {
  return createPool(url, { ...opts, asyncCommit: true });
}

/** Runs fn in a transaction; rolls back on any throw. */
export async function inTransaction<T>(db: Db, fn: (c: DbClient) => Promise<T>): Promise<T> {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    const out = await fn(c);
    await c.query('COMMIT');
    return out;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}

/** SQL fragment that renders a timestamptz as ISO 8601 with offset and microseconds. */
export function isoSql(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')`;
}
