import type pg from 'pg';
import { attemptInFlightSql } from '@ens/core/internal';
import { auditPool } from './workload.ts';

/*
 * What the soak (test/soak/run.ts) measures besides its invariants, as a caller and an operator
 * see it (issue 26): how long accepted deliveries took to end, how long the sends a killed worker
 * had in flight took to end, and every stall (deliveries that waited 5 s or more for their first
 * attempt) with whether /readyz or ens_consumer_up showed it while it lasted.
 */

/** A stall this long or longer must be visible to an operator. */
export const STALL_MS = 5_000;

const query = async <R extends pg.QueryResultRow>(url: string, sql: string, values: unknown[]) => {
  const db = auditPool(url);
  try {
    return (await db.query<R>(sql, values)).rows;
  } finally {
    await db.end();
  }
};

/** Accept → terminal (the last attempt's end) of the deliveries accepted in [from, to), in ms. */
export async function acceptToTerminal(url: string, from: number, to: number): Promise<number[]> {
  const rows = await query<{ ms: number }>(
    url,
    `SELECT (extract(epoch FROM max(a.finished_at) - d.created_at) * 1000)::float8 AS ms
       FROM deliveries d JOIN attempts a ON a.delivery_id = d.id
      WHERE d.created_at >= to_timestamp($1::float8 / 1000)
        AND d.created_at < to_timestamp($2::float8 / 1000)
        AND d.status <> 'pending'
      GROUP BY d.id`,
    [from, to],
  );
  return rows.map((r) => r.ms);
}

/**
 * The `n` deliveries accepted in [from, to) that took longest to end, each as one line: its
 * accept → terminal time, then every attempt as `#number +start..+end outcome` (seconds after the
 * accept), and the error of a lost one. A round over its p99 target prints these, so that what
 * the time went on is read off the record rather than guessed.
 */
export async function slowest(url: string, from: number, to: number, n: number): Promise<string[]> {
  const rows = await query<{ id: string; ms: number; attempts: string }>(
    url,
    `SELECT d.id,
            (extract(epoch FROM max(a.finished_at) - d.created_at) * 1000)::float8 AS ms,
            string_agg(format('#%s +%s..%s %s%s', a.number,
                         round(extract(epoch FROM a.started_at - d.created_at)::numeric, 1),
                         coalesce('+' || round(extract(epoch FROM a.finished_at - d.created_at)::numeric, 1), '?'),
                         coalesce(a.outcome, 'open'),
                         CASE WHEN a.outcome = 'lost' THEN ' (' || left(a.error, 60) || ')' ELSE '' END),
                       ', ' ORDER BY a.number) AS attempts
       FROM deliveries d JOIN attempts a ON a.delivery_id = d.id
      WHERE d.created_at >= to_timestamp($1::float8 / 1000)
        AND d.created_at < to_timestamp($2::float8 / 1000)
        AND d.status <> 'pending'
      GROUP BY d.id ORDER BY ms DESC LIMIT $3`,
    [from, to, n],
  );
  return rows.map((r) => `${r.id} ${(r.ms / 1000).toFixed(1)}s: ${r.attempts}`);
}

/** The p-th percentile (0–100) of `xs`, nearest rank; NaN when empty. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  ]!;
}

/** The deliveries a process (by pid) has sends in flight for: leased under its session. */
export async function inFlightOf(url: string, pid: number): Promise<string[]> {
  const rows = await query<{ id: string }>(
    url,
    `SELECT d.id FROM deliveries d JOIN process_sessions s ON s.id = d.claimed_by
      WHERE s.pid = $1 AND d.status = 'pending' AND d.lease_until > now()`,
    [pid],
  );
  return rows.map((r) => r.id);
}

/**
 * Resolves with the ms from `since` until none of `ids` is pending any more (or null after
 * `timeoutMs`): how long the sends a killed process had in flight took to end.
 */
export async function untilEnded(
  url: string,
  ids: string[],
  since: number,
  timeoutMs = 180_000,
): Promise<number | null> {
  if (ids.length === 0) return 0;
  // A pool: a connection lost to a PostgreSQL restart or failover is replaced on the next poll.
  const db = auditPool(url);
  try {
    for (;;) {
      const r = await db
        .query<{ n: string }>(
          `SELECT count(*) AS n FROM deliveries WHERE id = ANY($1::uuid[]) AND status = 'pending'`,
          [ids],
        )
        .catch(() => null);
      if (r && Number(r.rows[0]!.n) === 0) return Date.now() - since;
      if (Date.now() - since > timeoutMs) return null;
      await new Promise((res) => setTimeout(res, 100));
    }
  } finally {
    await db.end().catch(() => {});
  }
}

export interface HealthSample {
  at: number;
  node: string;
  /** The /readyz status; 0 when the process did not answer (down, killed, paused). */
  readyz: number;
  /** ens_consumer_up by consumer, from /metrics. */
  up: Record<string, number>;
}

/** Polls every node's /readyz and /metrics every `everyMs` until stopped. */
export function sampleNodes(
  nodes: readonly { name: string; port: number }[],
  everyMs = 500,
): { samples: HealthSample[]; stop(): Promise<void> } {
  const samples: HealthSample[] = [];
  let running = true;
  const get = (port: number, path: string) =>
    fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(everyMs * 2) }).then(
      async (r) => ({ status: r.status, text: await r.text() }),
      () => ({ status: 0, text: '' }),
    );
  const loop = (async () => {
    while (running) {
      const at = Date.now();
      await Promise.all(
        nodes.map(async (n) => {
          const [ready, metrics] = await Promise.all([
            get(n.port, '/readyz'),
            get(n.port, '/metrics'),
          ]);
          const up: Record<string, number> = {};
          for (const line of metrics.text.split('\n')) {
            const m = /^ens_consumer_up\{.*consumer="([^"]+)".*\} (\d+)/.exec(line);
            if (m) up[m[1]!] = Math.min(up[m[1]!] ?? 1, Number(m[2]));
          }
          samples.push({ at, node: n.name, readyz: ready.status, up });
        }),
      );
      await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (Date.now() - at))));
    }
  })();
  return {
    samples,
    async stop() {
      running = false;
      await loop;
    },
  };
}

export interface Stall {
  channel: string;
  /** What was waited for: a delivery's first attempt, or its next one after a retry's back-off. */
  kind: 'first attempt' | 'retry';
  /**
   * When the first delivery of the stall was accepted, and when the last of them was first tried.
   */
  from: number;
  to: number;
  deliveries: number;
  longestMs: number;
  /** What an operator saw while it lasted; empty when nothing showed it. */
  seen: string[];
}

/**
 * Deliveries accepted in [from, to) that waited STALL_MS or more for their first attempt, or for
 * their next attempt after a retry's back-off, merged per channel and kind into intervals, each
 * with what the samples showed within it: a /readyz 503, an ens_consumer_up 0 (of a consumer of
 * that channel), a process not answering.
 */
export async function stallsIn(
  url: string,
  from: number,
  to: number,
  samples: readonly HealthSample[],
): Promise<Stall[]> {
  const rows = await query<{
    channel: string;
    kind: Stall['kind'];
    created: number;
    first: number;
  }>(
    url,
    `SELECT * FROM (
     SELECT d.channel, 'first attempt' AS kind, extract(epoch FROM d.created_at) * 1000 AS created,
            -- an attempt in flight has no row yet (migration 017): its claim's time is on the row
            extract(epoch FROM coalesce(least(min(a.started_at), d.claimed_at), now())) * 1000 AS first
       FROM deliveries d LEFT JOIN attempts a ON a.delivery_id = d.id
      WHERE d.created_at >= to_timestamp($1::float8 / 1000)
        AND d.created_at < to_timestamp($2::float8 / 1000)
      GROUP BY d.id
     -- One that ended without an attempt (suppressed) never waited for one.
     HAVING (count(a.delivery_id) > 0 OR d.status = 'pending')
        AND coalesce(least(min(a.started_at), d.claimed_at), now()) - d.created_at >= $3 * interval '1 millisecond'
     UNION ALL
     -- A retry waits for its back-off (ENS_RETRY_BACKOFF, under a second here), then its next.
     SELECT d.channel, 'retry', extract(epoch FROM p.finished_at) * 1000,
            extract(epoch FROM a.started_at) * 1000
       FROM deliveries d
       JOIN attempts p ON p.delivery_id = d.id
       JOIN attempts a ON a.delivery_id = d.id AND a.number = p.number + 1
      WHERE d.created_at >= to_timestamp($1::float8 / 1000)
        AND d.created_at < to_timestamp($2::float8 / 1000)
        AND a.started_at - p.finished_at >= $3 * interval '1 millisecond'
     ) w ORDER BY created`,
    [from, to, STALL_MS],
  );
  const stalls: Stall[] = [];
  for (const r of rows) {
    const created = Number(r.created);
    const first = Number(r.first);
    const open = stalls.find(
      (s) => s.channel === r.channel && s.kind === r.kind && created <= s.to,
    );
    if (open) {
      open.to = Math.max(open.to, first);
      open.deliveries++;
      open.longestMs = Math.max(open.longestMs, first - created);
    } else {
      stalls.push({
        channel: r.channel,
        kind: r.kind,
        from: created,
        to: first,
        deliveries: 1,
        longestMs: first - created,
        seen: [],
      });
    }
  }
  for (const s of stalls) {
    const seen = new Set<string>();
    for (const x of samples) {
      if (x.at < s.from || x.at > s.to) continue;
      if (x.readyz === 503) seen.add(`${x.node} /readyz 503`);
      if (x.readyz === 0) seen.add(`${x.node} not answering`);
      for (const [consumer, v] of Object.entries(x.up))
        if (v === 0 && consumer.startsWith(`worker-${s.channel}`))
          seen.add(`${x.node} ens_consumer_up{${consumer}} 0`);
    }
    s.seen = [...seen];
  }
  return stalls;
}

/** Ms from `at` to the first attempt that ended in a send and started after it; NaN when none. */
export async function firstSendAfter(url: string, at: number): Promise<number> {
  const [row] = await query<{ ms: number | null }>(
    url,
    `SELECT (extract(epoch FROM min(started_at)) * 1000)::float8 AS ms FROM attempts
      WHERE outcome = 'sent' AND started_at >= to_timestamp($1::float8 / 1000)`,
    [at],
  );
  return row?.ms == null ? Number.NaN : Number(row.ms) - at;
}

/** Attempts in flight (an attempt's row is written when it ends, migration 017): open claims. */
export const OPEN_ATTEMPTS_SQL = `SELECT count(*) AS n FROM deliveries d WHERE ${attemptInFlightSql('d')}`;
