import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { Pool } from 'undici';
import { onCleanup } from './cleanup.ts';
import { spawnNode, startEns, type EnsChild, type StartEnsOptions } from './ens.ts';
import { statusCounts, waitNoPending } from './drain.ts';
import { ensPool, handoffBody, handoffId, mapLimit, phones, postHandoff } from './http.ts';
import { progress, wallMs } from './log.ts';
import type { Diagnosis } from './diagnostics.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));

interface ReceiverStats {
  count: number;
  first: number;
  last: number;
  signed: number;
  bodyBytes: number;
}

export interface Receiver {
  url: string;
  pid: number;
  /** Resets the counters; resolves once armed with a promise for the n-th post. */
  expect(n: number, timeoutMs?: number): Promise<{ done: Promise<ReceiverStats> }>;
  stats(): Promise<ReceiverStats>;
  stop(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const child: ChildProcess = await spawnNode(
    ['--import=tsx', path.join(HERE, 'receiver-child.ts')],
    {},
    'ipc',
  );
  child.stderr!.on('data', (d: Buffer) => process.stderr.write(`[receiver] ${d.toString()}`));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const stop = onCleanup('callback receiver', async () => {
    child.kill('SIGTERM');
    await exited;
  });
  const next = <T>(type: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const onMsg = (m: { type: string }) => {
        if (m.type !== type) return;
        child.off('message', onMsg);
        child.off('exit', onExit);
        resolve(m as T);
      };
      const onExit = () => reject(new Error('the callback receiver exited'));
      child.on('message', onMsg);
      child.once('exit', onExit);
    });
  const { port } = await next<{ port: number }>('listening');
  return {
    url: `http://127.0.0.1:${port}/hooks/ens`,
    pid: child.pid!,
    async expect(n, timeoutMs = 180_000) {
      const armed = next('armed');
      child.send({ type: 'expect', n });
      await armed;
      const done = next<ReceiverStats>('done');
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, rej) => {
        timer = setTimeout(
          () => rej(new Error(`the receiver did not get ${n} posts within ${timeoutMs / 1000} s`)),
          timeoutMs,
        );
      });
      const raced = Promise.race([done, timeout]).finally(() => clearTimeout(timer));
      raced.catch(() => {}); // awaited later by the caller; never an unhandled rejection meanwhile
      return { done: raced };
    },
    async stats() {
      const s = next<ReceiverStats>('stats');
      child.send({ type: 'stats' });
      return s;
    },
    stop,
  };
}

/** A callback body of the size ENS sends (~300 bytes). */
const SAMPLE_BODY = JSON.stringify({
  delivery_id: '0193a1f4-7c2e-7b3a-9d4e-5f6a7b8c9d0e',
  reference: null,
  channel: 'sms',
  recipient: '+15550003000',
  status: 'sent',
  attempts: 1,
  provider_message_id: 'sandbox-3f2c1d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f',
  sent_at: '2026-11-22T02:00:00.000000+00:00',
  delivered_at: null,
  read_at: null,
  last_error: null,
});

export interface CallbackRate {
  n: number;
  /** First post received → n-th post received, at the receiver. */
  ms: number;
  rate: number;
  signed?: number;
}

/**
 * Raw baseline: 64 concurrent loops POSTing a ~300-byte JSON body with undici (the client ENS's
 * callbacks role uses), one keep-alive pool, to the receiver process. Measured at the receiver.
 */
export async function rawCallbacks(
  receiver: Receiver,
  n: number,
  concurrency = 64,
): Promise<CallbackRate & { clientMs: number; bodyBytes: number }> {
  const origin = new URL(receiver.url).origin;
  const pool = new Pool(origin);
  const { done } = await receiver.expect(n);
  let sent = 0;
  let failures = 0;
  const t0 = wallMs();
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (sent < n) {
          sent++;
          const res = await pool.request({
            method: 'POST',
            path: '/hooks/ens',
            headers: { 'content-type': 'application/json' },
            body: SAMPLE_BODY,
          });
          await res.body.dump();
          if (res.statusCode !== 200) failures++;
        }
      }),
    );
    const clientMs = wallMs() - t0;
    const s = await done;
    if (failures > 0) progress(`raw callbacks: ${failures} posts were not answered 200`);
    const ms = s.last - s.first;
    return { n, ms, rate: n / (ms / 1000), clientMs, bodyBytes: Buffer.byteLength(SAMPLE_BODY) };
  } finally {
    await pool.destroy().catch(() => {});
  }
}

async function sendWithCallbacks(
  baseUrl: string,
  token: string,
  receiverUrl: string,
  n: number,
  perHandoff = 100,
): Promise<string[]> {
  const bodies = Array.from({ length: Math.ceil(n / perHandoff) }, (_, i) =>
    handoffBody(phones(Math.min(perHandoff, n - i * perHandoff), i * perHandoff), {
      eventType: 'callbacks',
      callbackUrl: receiverUrl,
    }),
  );
  const p = ensPool(baseUrl, 8);
  try {
    const results = await mapLimit(bodies, 8, (b) => postHandoff(p.pool, token, b));
    return results.map(handoffId);
  } finally {
    await p.close();
  }
}

export interface EnsCallbacksE2E extends CallbackRate {
  /** First POST /v2/messages → n-th callback received. */
  fromFirstPostMs: number;
  /** Sends per second: n / (first delivery sent_at → last sent_at). */
  sendRate: number;
  /** Posts per second at the receiver: n / (first callback received → n-th received). */
  postRate: number;
  /** Last delivery sent_at → n-th callback received: what was left to post when sending ended. */
  lagMs: number;
}

/**
 * End to end on an all-roles ENS: rate = n / (first delivery sent_at → n-th callback received).
 * The worker and the callbacks role run at once, so this is bounded by the slower of the two.
 */
export async function ensCallbacksEndToEnd(
  baseUrl: string,
  token: string,
  db: pg.Pool,
  receiver: Receiver,
  n: number,
): Promise<EnsCallbacksE2E> {
  const { done } = await receiver.expect(n);
  const t0 = wallMs();
  const ids = await sendWithCallbacks(baseUrl, token, receiver.url, n);
  const s = await done;
  const { rows } = await db.query<{ first_sent: number; last_sent: number }>(
    `SELECT (extract(epoch FROM min(sent_at)) * 1000)::float8 AS first_sent, (extract(epoch FROM max(sent_at)) * 1000)::float8 AS last_sent
       FROM deliveries WHERE handoff_id = ANY($1::uuid[])`,
    [ids],
  );
  const { first_sent: firstSent, last_sent: lastSent } = rows[0]!;
  const ms = s.last - firstSent;
  return {
    n,
    ms,
    rate: n / (ms / 1000),
    fromFirstPostMs: s.last - t0,
    signed: s.signed,
    sendRate: n / ((lastSent - firstSent) / 1000),
    postRate: n / ((s.last - s.first) / 1000),
    lagMs: s.last - lastSent,
  };
}

export interface EnsCallbacksIsolated extends CallbackRate {
  /** Spawn of the callbacks-only process → n-th callback received (includes its start-up). */
  fromSpawnMs: number;
  queued: number;
  diagnosis?: Diagnosis;
}

/**
 * The callbacks role alone: `feeder` (an ENS without the callbacks role) sends n deliveries with a
 * callback_url; once all are sent, n callbacks wait in PostgreSQL and JetStream. Then a
 * callbacks-only ENS starts and drains them. Rate = n / (first post received → n-th received).
 */
export async function ensCallbacksIsolated(
  feeder: { baseUrl: string; token: string },
  db: pg.Pool,
  receiver: Receiver,
  n: number,
  callbacksChild: Omit<StartEnsOptions, 'roles'>,
  /** Starts watching the machine once the callbacks-only process exists (its pid given). */
  diagnose?: (pid: number) => Promise<{ stop(): Promise<Diagnosis> }>,
): Promise<EnsCallbacksIsolated> {
  const ids = await sendWithCallbacks(feeder.baseUrl, feeder.token, receiver.url, n);
  await waitNoPending(db, 'callbacks (queueing)');
  const statuses = await statusCounts(db, ids);
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM callbacks WHERE status = 'pending'`,
  );
  const queued = rows[0]!.n;
  if (queued !== n || statuses.sent !== n)
    progress(
      `callbacks: expected ${n} sent and queued, found ${JSON.stringify(statuses)} and ${queued} queued`,
    );
  const { done } = await receiver.expect(n);
  const t0 = wallMs();
  let child: EnsChild | undefined;
  try {
    child = await startEns({ ...callbacksChild, roles: ['callbacks'] });
    const w = diagnose ? await diagnose(child.pid) : undefined;
    const s = await done;
    const diagnosis = await w?.stop();
    const ms = s.last - s.first;
    return {
      n,
      ms,
      rate: n / (ms / 1000),
      fromSpawnMs: s.last - t0,
      queued,
      signed: s.signed,
      ...(diagnosis ? { diagnosis } : {}),
    };
  } finally {
    await child?.stop();
  }
}
