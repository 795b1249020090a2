import { Pool } from 'undici';
import { onCleanup } from './cleanup.ts';

/**
 * HTTP to the ENS child goes through undici Pools (keep-alive, no pipelining): cheap enough per
 * request that the load generator is not the bottleneck on a 2-core machine.
 */
export interface BenchPool {
  pool: Pool;
  /** Destroys the pool (open sockets included). */
  close(): Promise<void>;
}

export function ensPool(baseUrl: string, connections: number): BenchPool {
  const pool = new Pool(baseUrl, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const close = onCleanup(`http pool ${baseUrl}`, () => pool.destroy().catch(() => {}));
  return { pool, close };
}

const runId = `${process.pid}-${Date.now().toString(36)}`;
let keySeq = 0;
/** A unique Idempotency-Key. */
export function nextKey(): string {
  return `bench-${runId}-${++keySeq}`;
}

/**
 * The i-th distinct sandbox phone number: +1 555 ppp ssss with ssss in 3000..9999, so none ends in
 * 0000, 1111 or 2222 (the sandbox's scripted failure, flaky and handset numbers).
 */
export function phone(i: number): string {
  const prefix = Math.floor(i / 7000);
  return `+1555${String(prefix).padStart(3, '0')}${3000 + (i % 7000)}`;
}

export function phones(n: number, offset = 0): string[] {
  return Array.from({ length: n }, (_, i) => phone(offset + i));
}

export function handoffBody(
  recipients: string[],
  o: { callbackUrl?: string; eventType?: string; reference?: string; tenant?: string } = {},
): string {
  return JSON.stringify({
    tenant: o.tenant ?? 'bench',
    event_type: o.eventType ?? 'bench',
    ...(o.reference ? { reference: o.reference } : {}),
    ...(o.callbackUrl ? { callback_url: o.callbackUrl } : {}),
    messages: [{ channel: 'sms', recipients, content: { kind: 'rendered', body: 'hi' } }],
  });
}

export interface PostResult {
  status: number;
  body: string;
}

/** POST /v2/messages with a fresh Idempotency-Key. Throws only on transport errors. */
export async function postHandoff(pool: Pool, token: string, body: string): Promise<PostResult> {
  const res = await pool.request({
    method: 'POST',
    path: '/v2/messages',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'idempotency-key': nextKey(),
    },
    body,
  });
  return { status: res.statusCode, body: await res.body.text() };
}

/** For 202 answers: the handoff id of the accepted body. */
export function handoffId(r: PostResult): string {
  if (r.status !== 202)
    throw new Error(`POST /v2/messages answered ${r.status}: ${r.body.slice(0, 300)}`);
  return (JSON.parse(r.body) as { handoff_id: string }).handoff_id;
}

/** Runs fn over items with at most `concurrency` at once; results in input order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** Classifies a thrown transport error for the outcome counts. */
export function errorOutcome(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return `error ${e.code ?? e.message ?? String(err)}`;
}
