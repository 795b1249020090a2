import { spawn } from 'node:child_process';
import { createPool } from '@ens/core/internal';
import type { Deployment } from './deployment.ts';
import { ENS_ARGV } from './ens-process.ts';
import type { ReceivedPost } from './receiver.ts';

/**
 * A client's traffic against a multi-process deployment, and the audit of what became of it.
 * The client behaves as a careful caller does: a handoff refused for a transient reason (the api
 * process it reached was killed, a 503) is sent again with the same Idempotency-Key and body to
 * another api process until it is accepted.
 */

/**
 * Short leases, grace and back-offs, so a fault test sees recovery in seconds rather than minutes.
 */
export const FAST_ENV = {
  ENS_LEASE: '3s',
  ENS_SWEEP_GRACE: '1s',
  ENS_RETRY_BACKOFF: '200ms,500ms',
  ENS_CALLBACK_BACKOFF: '200ms,500ms,1s,2s',
  ENS_WORKER_CONCURRENCY: '16',
  ENS_PROVIDER_CONFIG: JSON.stringify({ '@ens/plugin-sandbox': { handsetDelayMs: 50 } }),
};

export interface ApiClient {
  clientId: string;
  clientSecret: string;
}

export async function createClient(d: Deployment, name = 'soak'): Promise<ApiClient> {
  const out = await new Promise<string>((resolve, reject) => {
    const c = spawn(
      process.execPath,
      [...ENS_ARGV, 'clients', 'create', '--name', name, '--callback-secret'],
      { env: { ...process.env, ...d.env }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let s = '';
    c.stdout!.on('data', (b: Buffer) => (s += b.toString()));
    c.once('exit', (code) =>
      code === 0 ? resolve(s) : reject(new Error(`ens clients create exited ${code}`)),
    );
  });
  const j = JSON.parse(out) as { client_id: string; client_secret: string };
  return { clientId: j.client_id, clientSecret: j.client_secret };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call(
  d: Deployment,
  c: ApiClient,
  tokens: Map<string, string>,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  for (let tries = 0; ; tries++) {
    const urls = d.apiUrls();
    const base = urls[tries % Math.max(1, urls.length)];
    if (base) {
      try {
        let token = tokens.get(base);
        if (!token) {
          const r = await fetch(`${base}/v1/oauth2/token/`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({
              grant_type: 'client_credentials',
              client_id: c.clientId,
              client_secret: c.clientSecret,
            }),
            signal: AbortSignal.timeout(10_000),
          });
          if (r.status !== 200) throw new Error(`token ${r.status}`);
          token = ((await r.json()) as { access_token: string }).access_token;
          tokens.set(base, token);
        }
        const r = await fetch(base + path, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body ? { 'content-type': 'application/json' } : {}),
            ...headers,
          },
          ...(body ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(10_000),
        });
        const text = await r.text();
        if (r.status < 500 && r.status !== 429)
          return { status: r.status, json: text ? JSON.parse(text) : undefined };
      } catch {
        // the process was killed, or is restarting: try another
      }
    }
    if (tries > 600) throw new Error(`${method} ${path}: no api process accepted it`);
    await pause(100);
  }
}

export interface Flood {
  /** Handoffs accepted (202), each with its deliveries. */
  accepted: number;
  /** Each 202: Date.now() when it was answered, and its handoff_id (for lostHandoffs). */
  answers: { at: number; handoffId: string }[];
  stop(): Promise<void>;
}

/**
 * `lanes` concurrent senders, each handoff to two sms recipients (one fails at the sandbox) with a
 * callback URL.
 */
export async function startFlood(
  d: Deployment,
  c: ApiClient,
  callbackUrl: string,
  lanes = 4,
): Promise<Flood> {
  const tokens = new Map<string, string>();
  const t = await call(d, c, tokens, 'POST', '/v2/tenants', { tenant: 'soak' });
  if (t.status !== 201 && t.status !== 200) throw new Error(`tenant: ${t.status}`);
  let running = true;
  const flood: Flood = {
    accepted: 0,
    answers: [],
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
  let seq = 0;
  const lane = async (n: number) => {
    while (running) {
      const i = seq++;
      const key = `soak-${process.pid}-${n}-${i}-${Date.now()}`;
      const body = {
        tenant: 'soak',
        event_type: 'soak.test',
        callback_url: callbackUrl,
        messages: [
          {
            channel: 'sms',
            recipients: [
              `+1555${String(i).padStart(7, '0')}`,
              `+1666${String(i).padStart(5, '0')}1111`,
            ],
            content: { kind: 'rendered', body: 'soak' },
          },
        ],
      };
      const r = await call(d, c, tokens, 'POST', '/v2/messages', body, { 'idempotency-key': key });
      if (r.status !== 202)
        throw new Error(`handoff refused: ${r.status} ${JSON.stringify(r.json)}`);
      flood.accepted++;
      flood.answers.push({ at: Date.now(), handoffId: r.json.handoff_id });
      await pause(20);
    }
  };
  const workers = Array.from({ length: lanes }, (_, n) => lane(n));
  return flood;
}

export interface Audit {
  deliveries: number;
  ended: number;
  stranded: number;
  /** Deliveries with more than one successful send recorded: must be 0. */
  doubleSuccess: number;
  /**
   * Attempts cut off by a killed worker (the provider may have been called twice): at-least-once.
   */
  repeatedSends: number;
  callbacksPosted: number;
  callbacksDead: number;
  /** Terminal deliveries whose callback is neither posted nor dead-lettered. */
  callbacksLost: number;
  /** Webhook ids the receiver got more than once with a 2xx. */
  repeatedPosts: number;
}

/**
 * A pool of one connection: with a multi-host URL (target_session_attrs=read-write) it follows the
 * primary as ENS does, so an audit reads the server that took the writes, whichever it is now.
 */
export const auditPool = (databaseUrl: string) =>
  createPool(databaseUrl, { max: 1, applicationName: 'ens-audit' });

/** The ids of the handoffs answered 202 that the database does not have: lost (must be none). */
export async function lostHandoffs(databaseUrl: string, ids: readonly string[]): Promise<string[]> {
  const db = auditPool(databaseUrl);
  try {
    const r = await db.query<{ id: string }>(
      `SELECT i.id::text FROM unnest($1::uuid[]) i(id)
        WHERE NOT EXISTS (SELECT 1 FROM handoffs h WHERE h.id = i.id)`,
      [ids],
    );
    return r.rows.map((x) => x.id);
  } finally {
    await db.end();
  }
}

export async function audit(databaseUrl: string, posts: readonly ReceivedPost[]): Promise<Audit> {
  const db = auditPool(databaseUrl);
  try {
    const n = async (sql: string) => Number((await db.query<{ n: string }>(sql)).rows[0]!.n);
    const byId = new Map<string, number>();
    for (const p of posts) {
      if (p.answered < 200 || p.answered > 299) continue;
      const id = String(p.headers['webhook-id']);
      byId.set(id, (byId.get(id) ?? 0) + 1);
    }
    return {
      deliveries: await n('SELECT count(*) AS n FROM deliveries'),
      ended: await n(`SELECT count(*) AS n FROM deliveries WHERE status <> 'pending'`),
      stranded: await n(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`),
      doubleSuccess: await n(
        `SELECT count(*) AS n FROM (SELECT delivery_id FROM attempts WHERE outcome = 'sent' GROUP BY delivery_id HAVING count(*) > 1) x`,
      ),
      repeatedSends: await n(`SELECT count(*) AS n FROM attempts WHERE outcome = 'lost'`),
      callbacksPosted: await n(`SELECT count(*) AS n FROM callbacks WHERE status = 'delivered'`),
      callbacksDead: await n(`SELECT count(*) AS n FROM callbacks WHERE status = 'dead'`),
      callbacksLost: await n(
        `SELECT count(*) AS n FROM deliveries d WHERE d.status <> 'pending' AND NOT EXISTS (SELECT 1 FROM callbacks c WHERE c.delivery_id = d.id AND c.status IN ('delivered', 'dead'))`,
      ),
      repeatedPosts: [...byId.values()].filter((k) => k > 1).length,
    };
  } finally {
    await db.end();
  }
}

/**
 * Walks GET /v2/deliveries as a caller does (updated_since = the last updated_at seen, following
 * next_cursor), for as long as it runs; `skipped()` then compares what it saw last of each
 * delivery with the database: a change the walk never saw leaves a stale status behind.
 */
export function startFeedWalker(d: Deployment, c: ApiClient) {
  const tokens = new Map<string, string>();
  const seen = new Map<string, string>();
  let since = '';
  let running = true;
  const walkOnce = async () => {
    let path = `/v2/deliveries?limit=500${since ? `&updated_since=${encodeURIComponent(since)}` : ''}`;
    for (;;) {
      const r = await call(d, c, tokens, 'GET', path);
      if (r.status !== 200) throw new Error(`feed ${r.status}`);
      for (const row of r.json.results as {
        delivery_id: string;
        status: string;
        updated_at: string;
      }[]) {
        since = row.updated_at;
        seen.set(row.delivery_id, row.status);
      }
      if (!r.json.next_cursor) return;
      path = `/v2/deliveries?limit=500&cursor=${encodeURIComponent(r.json.next_cursor)}`;
    }
  };
  const loop = (async () => {
    while (running) {
      await walkOnce();
      await pause(200);
    }
  })();
  return {
    async stop(databaseUrl: string): Promise<number> {
      running = false;
      await loop;
      const db = auditPool(databaseUrl);
      try {
        for (
          let i = 0;
          i < 100 &&
          (await db.query('SELECT 1 FROM deliveries WHERE stamp_pending LIMIT 1')).rowCount;
          i++
        )
          await pause(100);
        await walkOnce();
        const truth = await db.query<{ id: string; status: string }>(
          'SELECT id::text, status FROM deliveries',
        );
        return truth.rows.filter((r) => seen.get(r.id) !== r.status).length;
      } finally {
        await db.end();
      }
    },
  };
}
