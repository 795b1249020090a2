import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ensPool, handoffBody, phone, postHandoff } from './http.ts';
import { closedLoop, openLoop, type LoadResult, type OpenLoopResult } from './load.ts';
import { progress } from './log.ts';

export interface AcceptSettings {
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

/**
 * Raw baseline: `concurrency` connections each looping BEGIN; INSERT one row; COMMIT (three round
 * trips, like any single-row transaction through a driver) against the same PostgreSQL.
 */
export async function rawAccept(databaseUrl: string, s: AcceptSettings): Promise<LoadResult> {
  const admin = new pg.Client({ connectionString: databaseUrl });
  // A server stopped under us (Ctrl-C reaches it too) must fail the phase, not crash the run.
  admin.on('error', () => {});
  await admin.connect();
  await admin.query('DROP TABLE IF EXISTS bench_raw');
  await admin.query('CREATE TABLE bench_raw (id uuid, payload text)');
  const clients = await Promise.all(
    Array.from({ length: s.concurrency }, async () => {
      const c = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-raw' });
      c.on('error', () => {});
      await c.connect();
      return c;
    }),
  );
  // The payload is the size of the handoff ENS stores per request.
  const payload = handoffBody([phone(0)]);
  try {
    return await closedLoop({
      ...s,
      isOk: (o) => o === 'ok',
      // Each closed-loop worker owns one connection.
      op: async (worker) => {
        const c = clients[worker]!;
        await c.query('BEGIN');
        await c.query('INSERT INTO bench_raw (id, payload) VALUES ($1, $2)', [
          randomUUID(),
          payload,
        ]);
        await c.query('COMMIT');
        return 'ok';
      },
    });
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    await admin.query('DROP TABLE IF EXISTS bench_raw').catch(() => {});
    await admin.end();
  }
}

/** Each op is one POST /v2/messages with one sms recipient; only 202 counts. */
function sendOne(pool: ReturnType<typeof ensPool>['pool'], token: string) {
  let i = 0;
  return async () =>
    (await postHandoff(pool, token, handoffBody([phone(i++ % 7000)]))).status.toString();
}

export async function ensAccept(
  baseUrl: string,
  token: string,
  s: AcceptSettings,
): Promise<LoadResult> {
  const p = ensPool(baseUrl, s.concurrency);
  try {
    return await closedLoop({ ...s, isOk: (o) => o === '202', op: sendOne(p.pool, token) });
  } finally {
    await p.close();
  }
}

/** Open loop at `rate` requests/s; latency measured from each request's scheduled time. */
export async function ensAcceptLatency(
  baseUrl: string,
  token: string,
  rate: number,
  s: Omit<AcceptSettings, 'concurrency'>,
): Promise<OpenLoopResult> {
  // Enough connections that the client never queues at the offered rate unless the server stalls.
  const p = ensPool(baseUrl, 128);
  try {
    const r = await openLoop({
      ...s,
      rate,
      maxOutstanding: 4096,
      isOk: (o) => o === '202',
      op: sendOne(p.pool, token),
    });
    if (r.skipped > 0)
      progress(
        `accept latency: generator skipped ${r.skipped} requests (4096 already outstanding)`,
      );
    return r;
  } finally {
    await p.close();
  }
}
