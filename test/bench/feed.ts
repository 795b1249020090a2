import type pg from 'pg';
import { Pool } from 'undici';
import { progress } from './log.ts';
import { summarise, type LatencySummary } from './stats.ts';

export interface FeedFill {
  target: number;
  existing: number;
  inserted: number;
  insertMs: number;
  vacuumMs: number;
  total: number;
}

const BATCH = 100_000;
/**
 * Each synthetic row gets reference ref-(n % REFERENCES), so one reference matches ~total/1000
 * rows.
 */
const REFERENCES = 1000;

/**
 * Tops the bench client's deliveries up to `target` rows straight in PostgreSQL (ENS idle): one
 * handoff row, then INSERT ... SELECT FROM generate_series in batches of 100,000 (one transaction
 * each), status sent, already stamped (stamp_pending false) with strictly increasing updated_at
 * from 2026-01-01 by 1 µs. Then VACUUM ANALYZE, as autovacuum would eventually do.
 */
export async function fillFeed(db: pg.Pool, clientId: string, target: number): Promise<FeedFill> {
  const existing = (
    await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1',
      [clientId],
    )
  ).rows[0]!.n;
  const toInsert = Math.max(0, target - existing);
  const t0 = Date.now();
  if (toInsert > 0) {
    const handoff = (
      await db.query<{ id: string }>(
        `INSERT INTO handoffs (id, client_id, tenant, event_type, reference, messages)
       VALUES (gen_random_uuid(), $1, 'bench', 'feed', NULL, '{"sms": {"kind": "rendered", "body": "hi"}}'::jsonb) RETURNING id`,
        [clientId],
      )
    ).rows[0]!.id;
    for (let from = 1; from <= toInsert; from += BATCH) {
      const to = Math.min(toInsert, from + BATCH - 1);
      await db.query(
        `INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, reference, channel, recipient, status, attempts,
                                 provider, provider_message_id, sent_at, next_attempt_at, version, created_at, updated_at, stamp_pending)
         SELECT gen_random_uuid(), $1, $2, 'bench', 'feed', 'ref-' || (n % ${REFERENCES}), 'sms', '+1555' || lpad((3000000 + n)::text, 7, '0'),
                'sent', 1, 'sandbox', 'sandbox-feed-' || n, ts, ts, 2, ts, ts, false
           FROM generate_series($3::int, $4::int) AS n,
                LATERAL (SELECT '2026-01-01'::timestamptz + n * interval '1 microsecond' AS ts) AS t`,
        [handoff, clientId, from, to],
      );
      progress(
        `feed: inserted ${to.toLocaleString('en-US')} / ${toInsert.toLocaleString('en-US')} rows (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
      );
    }
  }
  const insertMs = Date.now() - t0;
  const v0 = Date.now();
  progress('feed: VACUUM ANALYZE deliveries');
  await db.query('VACUUM ANALYZE deliveries');
  const vacuumMs = Date.now() - v0;
  const total = (
    await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1',
      [clientId],
    )
  ).rows[0]!.n;
  return { target, existing, inserted: toInsert, insertMs, vacuumMs, total };
}

export interface FeedCase {
  name: string;
  query: string;
  rows: number;
  ms: LatencySummary;
}

/** The updated_at (as the feed formats it) of the row at `offset` in the client's feed order. */
async function stampAt(db: pg.Pool, clientId: string, offset: number): Promise<string> {
  const { rows } = await db.query<{ u: string }>(
    `SELECT to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') AS u
       FROM deliveries WHERE client_id = $1 AND updated_at IS NOT NULL ORDER BY updated_at OFFSET $2 LIMIT 1`,
    [clientId, offset],
  );
  if (!rows[0]) throw new Error(`no feed row at offset ${offset}`);
  return rows[0].u;
}

/**
 * Times GET /v2/deliveries?limit=1000 pages at the start, middle and end of the feed, and with a
 * reference filter: `runs` timed requests per case after 3 untimed ones, one at a time, wall time
 * until the whole body is read. A case whose untimed requests already take over SLOW_MS gets only
 * SLOW_RUNS timed ones, so a slow feed cannot stretch the run by minutes (the miss shows anyway).
 */
export async function timeFeedPages(
  baseUrl: string,
  token: string,
  db: pg.Pool,
  clientId: string,
  total: number,
  runs = 20,
): Promise<FeedCase[]> {
  const middle = await stampAt(db, clientId, Math.floor(total / 2));
  const nearEnd = await stampAt(db, clientId, Math.max(0, total - 1001));
  const cases: { name: string; params: Record<string, string> }[] = [
    { name: 'start', params: { limit: '1000' } },
    { name: 'middle', params: { limit: '1000', updated_since: middle } },
    { name: 'end', params: { limit: '1000', updated_since: nearEnd } },
    { name: 'reference, start', params: { limit: '1000', reference: 'ref-7' } },
    {
      name: 'reference, middle',
      params: { limit: '1000', reference: 'ref-7', updated_since: middle },
    },
  ];
  const SLOW_MS = 250;
  const SLOW_RUNS = 5;
  const pool = new Pool(baseUrl, { connections: 1 });
  const out: FeedCase[] = [];
  try {
    for (const c of cases) {
      const path = `/v2/deliveries?${new URLSearchParams(c.params).toString()}`;
      const times: number[] = [];
      const warm: number[] = [];
      let rows = 0;
      let n = runs;
      for (let i = 0; i < n + 3; i++) {
        const t0 = performance.now();
        const res = await pool.request({
          method: 'GET',
          path,
          headers: { authorization: `Bearer ${token}` },
        });
        const text = await res.body.text();
        const ms = performance.now() - t0;
        if (res.statusCode !== 200)
          throw new Error(`GET ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
        rows = (JSON.parse(text) as { results: unknown[] }).results.length;
        if (i >= 3) times.push(ms);
        else warm.push(ms);
        if (i === 2 && Math.max(...warm) > SLOW_MS) {
          n = SLOW_RUNS;
          progress(
            `feed: ${c.name}: untimed requests took ${warm.map((w) => w.toFixed(0)).join(', ')} ms; timing only ${SLOW_RUNS}`,
          );
        }
      }
      const s = summarise(times);
      out.push({ name: c.name, query: path, rows, ms: s });
      progress(
        `feed: ${c.name}: ${rows} rows, p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms`,
      );
    }
  } finally {
    await pool.destroy().catch(() => {});
  }
  return out;
}
