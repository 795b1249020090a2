import { withClient, type Db } from './pool.ts';

/*
 * The hot statements (claim, finish, feed stamp) join a batch of ids to deliveries and attempts,
 * and are only fast on the primary-key plans. PostgreSQL picks plans from the tables' statistics,
 * and autovacuum refreshes those at most once a minute (autovacuum_naptime) and only after 10 % of
 * the rows changed. A table analysed while it was nearly empty (a new install, or right after a
 * bulk delete) therefore keeps "empty" statistics while it grows by tens of thousands of rows; the
 * planner then chooses hash joins over full scans, and the pipeline slowed by a third to a half
 * after 25,000 deliveries in the bench (issue 11). Measured with pg_stat_statements: the finish's
 * attempts update went from 3 to 9 ms a call, 222 full scans of attempts in one 10,000 handoff.
 *
 * This job looks every few seconds at ENS's growing tables and analyses one whose live rows have
 * more than doubled since its statistics were taken (or that has none). Growth alone triggers it,
 * so a large table that is steady is left to autovacuum, and a growing one is analysed about
 * log2(size) times in all. ANALYZE samples a fixed 30,000 rows: tens of milliseconds.
 *
 * It analyses only the columns that some index of the table uses (as a key or in its predicate):
 * the plans choose among indexes by those, and the row count comes with any column list. The
 * others (snapshots, traceparents, errors: long, nearly unique text) were most of the work: on
 * 40,000 callbacks, 170–230 ms for the whole table against 50 ms for its key, and in the WAL bench
 * (issue 27) this job's ANALYZE was 4–7 % of PostgreSQL's CPU. A column list leaves the table's
 * count of changes since its last analysis as it was, so autovacuum still analyses every column
 * when its own threshold comes.
 */

/** The tables the hot path joins on, in the order they are checked. */
export const GROWING_TABLES = [
  'deliveries',
  'attempts',
  'handoffs',
  'callbacks',
  'callback_attempts',
  'delivery_events',
  'media_refs',
  'idempotency_keys',
] as const;

/** Tables smaller than this are left alone: any plan is fast on them. */
const MIN_ROWS = 1_000;
/** Live rows beyond this multiple of the analysed count make the statistics stale. */
const GROWTH = 2;
/** One process analyses at a time; the others skip the round. */
const LOCK = 7466010;

export interface StaleTable {
  table: string;
  analysedRows: number;
  liveRows: number;
}

/**
 * The columns the indexes of table $1 use, keys and predicates alike (each is recorded as a
 * dependency of its index), quoted for ANALYZE's column list; null when it has no index.
 */
const INDEXED_COLUMNS_SQL = `
SELECT string_agg(DISTINCT format('%I', a.attname), ', ') AS list
  FROM pg_index i
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = i.indexrelid
                  AND d.refclassid = 'pg_class'::regclass AND d.refobjid = i.indrelid AND d.refobjsubid > 0
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = d.refobjsubid
 WHERE i.indrelid = format('%I.%I', current_schema(), $1::text)::regclass`;

/** ENS's tables whose statistics no longer describe their size. */
export async function staleTables(db: Db): Promise<StaleTable[]> {
  const r = await db.query<{ table: string; analysed: number; live: string }>(
    `SELECT c.relname AS table, c.reltuples AS analysed, s.n_live_tup AS live
       FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE c.relname = ANY($1::text[]) AND c.relnamespace = current_schema()::regnamespace`,
    [GROWING_TABLES],
  );
  return r.rows
    .map((x) => ({ table: x.table, analysedRows: Number(x.analysed), liveRows: Number(x.live) }))
    .filter(
      (x) => x.liveRows >= MIN_ROWS && (x.analysedRows < 0 || x.liveRows > GROWTH * x.analysedRows),
    )
    .sort(
      (a, b) =>
        GROWING_TABLES.indexOf(a.table as (typeof GROWING_TABLES)[number]) -
        GROWING_TABLES.indexOf(b.table as (typeof GROWING_TABLES)[number]),
    );
}

/**
 * Analyses each stale table; returns the ones it analysed (none when another process holds the
 * turn).
 */
export function refreshStatistics(db: Db): Promise<string[]> {
  return withClient(db, async (c) => {
    const { rows } = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
      LOCK,
    ]);
    if (!rows[0]!.ok) return [];
    try {
      const done: string[] = [];
      for (const s of await staleTables(db)) {
        const { rows: cols } = await c.query<{ list: string | null }>(INDEXED_COLUMNS_SQL, [
          s.table,
        ]);
        // The name comes from GROWING_TABLES, never from input; the columns are quoted by format().
        await c.query(`ANALYZE ${s.table}${cols[0]?.list ? ` (${cols[0].list})` : ''}`);
        done.push(s.table);
      }
      return done;
    } finally {
      await c.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    }
  });
}
