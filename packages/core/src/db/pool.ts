import pg from 'pg';

export type Db = pg.Pool;
export type DbClient = pg.PoolClient;

/*
 * The hot statements (a claim, a finish, a feed stamp, a callback claim or record) each join a
 * batch of at most a few hundred ids to tables of any size: the only good plan looks each id up by
 * primary key. PostgreSQL's cost model disagrees while a table is small or its statistics are
 * stale: it scans and hashes the whole table, every batch, so each batch costs more as the record
 * grows (issue 11: a third to half of the pipeline's rate lost after 25,000 deliveries, one scan of
 * attempts per batch). Those plans are ruled out for them: by the session settings of the pools made
 * for them (createPool's `byIds`), or within the statement's own transaction on any other pool.
 * They are also always planned generically, once per session: each is written so that its generic
 * plan reads only its batch, and PostgreSQL's choice between a custom and a generic plan follows
 * the costs of the first batches, which a session's first, single-row batches skew (a claim with
 * the suppression list's per-row look-up was kept on custom plans, planned again every batch).
 */
const BY_IDS_SETTINGS = ['enable_seqscan=off', 'enable_hashjoin=off', 'enable_mergejoin=off', 'plan_cache_mode=force_generic_plan'];
/** Pools whose every session plans statements as lookups by key (see BY_IDS); queryByIds uses them as they are. */
const keyedPools = new WeakSet<Db>();

/**
 * One pool per process. Timestamps are formatted by the SQL that reads them (microseconds
 * matter for the feed), so the driver's Date parsing is never relied on.
 *
 * `byIds`: the pool only ever runs the hot batch statements (see queryByIds), so its sessions
 * carry the by-key planner settings from the start, and each statement is one round trip instead
 * of three (a transaction around SET LOCAL, the statement and COMMIT).
 */
export function createPool(url: string, opts: { max?: number; applicationName?: string; asyncCommit?: boolean; byIds?: boolean } = {}): Db {
  const settings = [...(opts.asyncCommit ? ['synchronous_commit=off'] : []), ...(opts.byIds ? BY_IDS_SETTINGS : [])];
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 20,
    application_name: opts.applicationName ?? 'ens',
    idleTimeoutMillis: 30_000,
    // With PostgreSQL away, a request waiting for a connection gets an error (a 503) within this,
    // not a hang past its client's own timeout.
    connectionTimeoutMillis: 5_000,
    ...(settings.length > 0 ? { options: settings.map((x) => `-c ${x}`).join(' ') } : {}),
  });
  // An idle client losing its connection (PostgreSQL restart) must not crash the process; the
  // pool replaces it on next use.
  pool.on('error', () => {});
  if (opts.byIds) keyedPools.add(pool);
  return pool;
}

const BY_IDS = `BEGIN; ${BY_IDS_SETTINGS.map((x) => `SET LOCAL ${x.replace('=', ' = ')}`).join('; ')}`;

/**
 * Runs one statement that works on a batch of ids, planned as lookups by key (see BY_IDS): as it
 * is on a pool made with `byIds`, within a transaction that sets them on any other.
 */
export function queryByIds<R extends pg.QueryResultRow = pg.QueryResultRow>(db: Db, q: pg.QueryConfig): Promise<pg.QueryResult<R>> {
  if (keyedPools.has(db)) return db.query<R>(q);
  return transaction(db, BY_IDS, (c) => c.query<R>(q));
}

/**
 * A pool whose commits return before their WAL reaches disk, for bookkeeping that a PostgreSQL
 * crash may lose without harm: leases (a lost claim just expires) and callback attempt records (a
 * lost one means a re-post with the same webhook-id). Never for accepts, outcomes or the feed.
 */
export function createAsyncCommitPool(url: string, opts: { max?: number; applicationName?: string; byIds?: boolean } = {}): Db {
  return createPool(url, { ...opts, asyncCommit: true });
}

/** Runs fn in a transaction; rolls back on any throw. */
export function inTransaction<T>(db: Db, fn: (c: DbClient) => Promise<T>): Promise<T> {
  return transaction(db, 'BEGIN', fn);
}

/**
 * Runs fn between `begin` (BEGIN and any SET LOCAL) and COMMIT on one client. PostgreSQL going
 * away between two of its statements is reported as an 'error' event on the client (no query is
 * waiting for it), which would end the process unheard: it is kept, the next query fails with it,
 * and the broken client is discarded on release.
 */
async function transaction<T>(db: Db, begin: string, fn: (c: DbClient) => Promise<T>): Promise<T> {
  const c = await db.connect();
  let broken: Error | undefined;
  const onError = (e: Error) => void (broken = e);
  c.on('error', onError);
  try {
    await c.query(begin);
    const out = await fn(c);
    await c.query('COMMIT');
    return out;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.off('error', onError);
    c.release(broken);
  }
}

/** SQL fragment that renders a timestamptz as ISO 8601 with offset and microseconds. */
export function isoSql(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')`;
}
