import pg from 'pg';
import { ConfigError } from '../config/config-error.ts';
import {
  parseLibpqUrl,
  writerTarget,
  type LibpqUrl,
  type TargetSessionAttrs,
} from './libpq-url.ts';
import { HostFinder } from './target-session.ts';

export type Db = pg.Pool;
export type DbClient = pg.PoolClient;

/*
 * The hot statements (a claim, a finish, a feed stamp, a callback claim or record) each join a
 * batch of at most a few hundred ids to tables of any size: the only good plan looks each id up by
 * primary key. PostgreSQL's cost model disagrees while a table is small or its statistics are
 * stale: it scans and hashes the whole table, every batch, so each batch costs more as the record
 * grows (issue 11: a third to half of the pipeline's rate lost after 25,000 deliveries, one scan of
 * attempts per batch). Those plans are ruled out for them: by the session settings of the pools
 * made for them (createPool's `byIds`), or within the statement's own transaction on any other
 * pool. They are also always planned generically, once per session: each is written so that its
 * generic plan reads only its batch, and PostgreSQL's choice between a custom and a generic plan
 * follows the costs of the first batches, which a session's first, single-row batches skew (a claim
 * with the suppression list's per-row look-up was kept on custom plans, planned again every batch).
 */
const BY_IDS_SETTINGS = [
  'enable_seqscan=off',
  'enable_hashjoin=off',
  'enable_mergejoin=off',
  'plan_cache_mode=force_generic_plan',
];
/**
 * Pools whose every session plans statements as lookups by key (see BY_IDS); queryByIds uses them
 * as they are.
 */
const keyedPools = new WeakSet<Db>();

/** How long a connection may take to open, probes of a multi-host URL included. */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * One HostFinder per URL in a process: the pools made from it (see openRuntime) share what one of
 * them learnt, so after a failover one search finds the new primary for all.
 */
const finders = new Map<string, HostFinder>();

/**
 * A Client class that connects only where the URL's target_session_attrs allows (see
 * target-session.ts), or undefined for a URL of one host that asks for nothing: node-postgres
 * gets that URL as it always has.
 */
function targetClient(url: string): { url: string; Client?: typeof pg.Client } {
  let parsed: LibpqUrl;
  let target: TargetSessionAttrs;
  try {
    parsed = parseLibpqUrl(url);
    target = writerTarget(parsed);
  } catch (e) {
    throw new ConfigError(`DATABASE_URL: ${(e as Error).message}`);
  }
  if (target === 'any') return { url: parsed.url };
  let finder = finders.get(url);
  if (!finder) {
    finder = new HostFinder(parsed.hosts, target, {
      connectionString: parsed.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    });
    finders.set(url, finder);
  }
  return { url: parsed.url, Client: finder.clientClass() };
}

/**
 * One pool per process. Timestamps are formatted by the SQL that reads them (microseconds
 * matter for the feed), so the driver's Date parsing is never relied on.
 *
 * `byIds`: the pool only ever runs the hot batch statements (see queryByIds), so its sessions
 * carry the by-key planner settings from the start, and each statement is one round trip instead
 * of three (a transaction around SET LOCAL, the statement and COMMIT).
 */
export function createPool(
  url: string,
  opts: {
    max?: number;
    applicationName?: string;
    asyncCommit?: boolean;
    byIds?: boolean;
    /**
     * PostgreSQL ends a session left idle inside a transaction this long, and with it the
     * transaction and its locks (unset: never). See openRuntime.
     */
    idleInTransactionMs?: number;
  } = {},
): Db {
  const settings = [
    ...(opts.asyncCommit ? ['synchronous_commit=off'] : []),
    ...(opts.byIds ? BY_IDS_SETTINGS : []),
  ];
  const target = targetClient(url);
  const pool = new pg.Pool({
    connectionString: target.url,
    // A URL of several hosts: each connection goes where target_session_attrs allows.
    ...(target.Client ? { Client: target.Client as unknown as new () => pg.ClientBase } : {}),
    max: opts.max ?? 20,
    application_name: opts.applicationName ?? 'ens',
    idleTimeoutMillis: 30_000,
    // With PostgreSQL away, a request waiting for a connection gets an error (a 503) within this,
    // not a hang past its client's own timeout.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...(opts.idleInTransactionMs
      ? { idle_in_transaction_session_timeout: opts.idleInTransactionMs }
      : {}),
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
export function queryByIds<R extends pg.QueryResultRow = pg.QueryResultRow>(
  db: Db,
  q: pg.QueryConfig,
): Promise<pg.QueryResult<R>> {
  if (keyedPools.has(db)) return db.query<R>(q);
  return transaction(db, BY_IDS, (c) => c.query<R>(q));
}

/**
 * A pool whose commits return before their WAL reaches disk, for bookkeeping that a PostgreSQL
 * crash may lose without harm: leases (a lost claim just expires) and callback attempt records (a
 * lost one means a re-post with the same webhook-id). Never for accepts, outcomes or the feed.
 */
export function createAsyncCommitPool(
  url: string,
  opts: Omit<Parameters<typeof createPool>[1] & object, 'asyncCommit'> = {},
): Db {
  return createPool(url, { ...opts, asyncCommit: true });
}

/** Runs fn in a transaction; rolls back on any throw. */
export function inTransaction<T>(db: Db, fn: (c: DbClient) => Promise<T>): Promise<T> {
  return transaction(db, 'BEGIN', fn);
}

/**
 * Runs fn on one client of the pool, for work that needs a session of its own: a transaction, an
 * advisory lock held across statements. PostgreSQL going away while the client is checked out and
 * no query of it waits (between two statements, or while fn reads through the pool) is reported as
 * an 'error' event on the client, which without a listener ends the process: a PostgreSQL kill
 * while the table-statistics job held its lock did (test/fault/postgres-killed-mid-session.test.ts).
 * Here the error is kept, the next query fails with it, and the broken client is discarded on
 * release. Every checked-out client goes through this (test/architecture/db-sessions.test.ts).
 */
export async function withClient<T>(db: Db, fn: (c: DbClient) => Promise<T>): Promise<T> {
  const c = await db.connect();
  let broken: Error | undefined;
  const onError = (e: Error) => {
    broken = e;
  };
  c.on('error', onError);
  try {
    return await fn(c);
  } finally {
    c.off('error', onError);
    c.release(broken);
  }
}

/** Runs fn between `begin` (BEGIN and any SET LOCAL) and COMMIT on one client (withClient). */
function transaction<T>(db: Db, begin: string, fn: (c: DbClient) => Promise<T>): Promise<T> {
  return withClient(db, async (c) => {
    try {
      await c.query(begin);
      const out = await fn(c);
      await c.query('COMMIT');
      return out;
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {});
      throw e;
    }
  });
}

/** SQL fragment that renders a timestamptz as ISO 8601 with offset and microseconds. */
export function isoSql(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')`;
}
