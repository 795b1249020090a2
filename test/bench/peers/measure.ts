import type pg from 'pg';
import { checkAborted } from '../cleanup.ts';
import { ensPool, handoffBody, mapLimit, phone, phones } from '../http.ts';
import { closedLoop, type LoadResult } from '../load.ts';
import { progress, sleep, wallMs } from '../log.ts';
import type { AcceptSettings } from '../accept.ts';

/**
 * The loads the bench puts on ENS, put on a peer: the same bodies (handoffBody), the same undici
 * pools and concurrency, the same completion rule (polling PostgreSQL every 20 ms, as
 * waitNoPending does for ENS), so the figures compare like for like.
 */

async function postMessages(
  pool: ReturnType<typeof ensPool>['pool'],
  body: string,
): Promise<number> {
  const res = await pool.request({
    method: 'POST',
    path: '/messages',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const text = await res.body.text();
  if (res.statusCode !== 202)
    throw new Error(`peer POST /messages answered ${res.statusCode}: ${text.slice(0, 300)}`);
  return res.statusCode;
}

/** The accept phase's closed loop against a peer: one sms recipient per POST, only 202 counts. */
export async function peerAccept(baseUrl: string, s: AcceptSettings): Promise<LoadResult> {
  const p = ensPool(baseUrl, s.concurrency);
  let i = 0;
  try {
    return await closedLoop({
      ...s,
      isOk: (o) => o === '202',
      op: async () => {
        const res = await p.pool.request({
          method: 'POST',
          path: '/messages',
          headers: { 'content-type': 'application/json' },
          body: handoffBody([phone(i++ % 7000)]),
        });
        await res.body.text();
        return res.statusCode.toString();
      },
    });
  } finally {
    await p.close();
  }
}

export interface PeerPipelineResult {
  n: number;
  handoffs: number;
  /** First POST → the poll that finds every outcome row committed. */
  ms: number;
  rate: number;
  /** First POST → last 202. */
  acceptMs: number;
}

/**
 * Polls `schema`.outcomes every 20 ms until `n` rows of this run are there; the wall time it saw
 * them.
 */
async function waitOutcomes(
  db: pg.Pool,
  schema: string,
  run: string,
  n: number,
  timeoutMs = 300_000,
): Promise<number> {
  const t0 = Date.now();
  let lastLog = t0;
  for (;;) {
    checkAborted();
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${schema}.outcomes WHERE run = $1`,
      [run],
    );
    const now = wallMs();
    const seen = rows[0]!.n;
    if (seen >= n) return now;
    if (Date.now() - t0 > timeoutMs)
      throw new Error(`${schema}: ${seen} of ${n} outcomes recorded after ${timeoutMs / 1000} s`);
    if (Date.now() - lastLog > 3000) {
      lastLog = Date.now();
      progress(`${schema}: ${seen} of ${n} outcomes recorded`);
    }
    await sleep(20);
  }
}

let runSeq = 0;

/**
 * `handoffs` POSTs of `perHandoff` recipients each, 8 at a time (the shape of ENS's pipeline phase;
 * handoffs = 1 is the fan-out's single 10,000-recipient request). Rate = N / (first POST → all
 * outcomes).
 */
export async function peerPipeline(
  baseUrl: string,
  db: pg.Pool,
  schema: string,
  handoffs: number,
  perHandoff: number,
): Promise<PeerPipelineResult> {
  const run = `${schema}-${++runSeq}`;
  const bodies = Array.from({ length: handoffs }, (_, i) =>
    handoffBody(phones(perHandoff, i * perHandoff), { eventType: run }),
  );
  const p = ensPool(baseUrl, Math.min(8, handoffs));
  try {
    const t0 = wallMs();
    await mapLimit(bodies, 8, (b) => postMessages(p.pool, b));
    const acceptMs = wallMs() - t0;
    const n = handoffs * perHandoff;
    const done = await waitOutcomes(db, schema, run, n);
    const ms = done - t0;
    return { n, handoffs, ms, rate: n / (ms / 1000), acceptMs };
  } finally {
    await p.close();
  }
}
