import { connect } from '@nats-io/transport-node';
import {
  sandboxPhones,
  smsHandoff,
  uniqueKey,
  type TestClient,
  type TestService,
} from './service.ts';

/*
 * What the NATS leader-change fault tests share: a steady trickle of sms handoffs, a sampler of
 * what an operator sees (/readyz and ens_consumer_up), and the measure that matters to a caller:
 * how long an accepted delivery waited for its first attempt.
 */

export interface Trickle {
  /**
   * Stops sending and waits for the handoffs in flight; resolves with the answers counted by
   * status.
   */
  stop(): Promise<Map<number, number>>;
}

/**
 * Sends one sms handoff of `recipients` every `everyMs` until stopped. More than BULK_WAKEUPS
 * recipients go to the channel's bulk lane, fewer to its first lane.
 */
export function startTrickle(
  svc: TestService,
  client: TestClient,
  tenant: string,
  opts: { everyMs: number; recipients: number; from: number },
): Trickle {
  const statuses = new Map<number, number>();
  let running = true;
  let next = opts.from;
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const recipients = sandboxPhones(opts.recipients, next);
      next += opts.recipients * 2;
      const r = await svc
        .send(client, smsHandoff(tenant, recipients), uniqueKey('trickle'))
        .catch(() => ({ status: 0 }));
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      await new Promise((res) =>
        setTimeout(res, Math.max(0, opts.everyMs - (Date.now() - started))),
      );
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return statuses;
    },
  };
}

export interface HealthSample {
  at: number;
  readyz: number;
  /** The loops /readyz named as not consuming (`stream/consumer`). */
  notConsuming: string[];
  /** ens_consumer_up by consumer name. */
  up: Record<string, number>;
}

/** Polls /readyz and /metrics every `everyMs` until stopped. */
export function sampleHealth(
  svc: TestService,
  everyMs = 250,
): { samples: HealthSample[]; stop(): Promise<void> } {
  const samples: HealthSample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const at = Date.now();
      const [ready, metrics] = await Promise.all([
        svc.request('GET', '/readyz'),
        svc.request('GET', '/metrics'),
      ]).catch(() => [null, null]);
      if (ready && metrics) {
        const checks: Record<string, string> = ready.body?.checks ?? {};
        const up: Record<string, number> = {};
        for (const line of metrics.text.split('\n')) {
          const m = /^ens_consumer_up\{.*consumer="([^"]+)".*\} (\d+)/.exec(line);
          if (m) up[m[1]!] = Number(m[2]);
        }
        samples.push({
          at,
          readyz: ready.status,
          notConsuming: Object.keys(checks)
            .filter((k) => k.startsWith('loop '))
            .map((k) => k.slice(5)),
          up,
        });
      }
      await new Promise((res) => setTimeout(res, Math.max(0, everyMs - (Date.now() - at))));
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

export interface Gap {
  id: string;
  recipients: number;
  createdAt: number;
  firstAttemptAt: number;
  gapMs: number;
}

/**
 * The delivery accepted at or after `since` that waited longest for its first attempt (a delivery
 * not yet tried counts until now); with `recipients`, only among handoffs of that many.
 */
export async function worstFirstAttemptGap(
  svc: TestService,
  since: number,
  recipients?: number,
): Promise<Gap | null> {
  const { rows } = await svc.rt.db.query<{
    id: string;
    recipients: string;
    created: string;
    first: string;
  }>(
    `SELECT id, recipients, created, first FROM (
       SELECT d.id, (SELECT count(*) FROM deliveries o WHERE o.handoff_id = d.handoff_id) AS recipients,
              extract(epoch FROM d.created_at) * 1000 AS created,
              -- an attempt in flight has no row yet (migration 017): its claim's time is on the row
              extract(epoch FROM coalesce(least(min(a.started_at), d.claimed_at), now())) * 1000 AS first
         FROM deliveries d LEFT JOIN attempts a ON a.delivery_id = d.id
        WHERE d.created_at >= to_timestamp($1::float8 / 1000)
        GROUP BY d.id) g
      WHERE $2::int IS NULL OR recipients = $2
      ORDER BY first - created DESC
      LIMIT 1`,
    [since, recipients ?? null],
  );
  const r = rows[0];
  if (!r) return null;
  const createdAt = Number(r.created);
  const firstAttemptAt = Number(r.first);
  return {
    id: r.id,
    recipients: Number(r.recipients),
    createdAt,
    firstAttemptAt,
    gapMs: Math.round(firstAttemptAt - createdAt),
  };
}

/**
 * Whether an operator could have seen the wait of `gap`: a sample taken while it waited in which
 * /readyz answered 503 naming one of `consumers`, or ens_consumer_up was 0 for one of them.
 */
export function stallSeen(
  samples: readonly HealthSample[],
  gap: Gap,
  consumers: readonly string[],
): HealthSample | undefined {
  return samples.find(
    (s) =>
      s.at >= gap.createdAt &&
      s.at <= gap.firstAttemptAt &&
      consumers.some(
        (c) =>
          (s.readyz === 503 && s.notConsuming.some((n) => n.endsWith(`/${c}`))) || s.up[c] === 0,
      ),
  );
}

/**
 * Asks JetStream to move the leader of a consumer (nothing is killed); resolves with the server's
 * answer.
 */
export async function stepDownConsumer(
  url: string,
  stream: string,
  consumer: string,
): Promise<unknown> {
  const nc = await connect({ servers: url.split(',') });
  try {
    const r = await nc.request(`$JS.API.CONSUMER.LEADER.STEPDOWN.${stream}.${consumer}`, '', {
      timeout: 5_000,
    });
    return r.json();
  } finally {
    await nc.close();
  }
}

/** The name of the node that leads a consumer now. */
export async function consumerLeader(
  url: string,
  stream: string,
  consumer: string,
): Promise<string | undefined> {
  const nc = await connect({ servers: url.split(',') });
  try {
    const r = await nc.request(`$JS.API.CONSUMER.INFO.${stream}.${consumer}`, '', {
      timeout: 5_000,
    });
    return (r.json() as { cluster?: { leader?: string } }).cluster?.leader;
  } finally {
    await nc.close();
  }
}

/**
 * Asks every 100 ms until the stream and each consumer answer with a leader other than `lost`;
 * resolves with the time (ms since the epoch) the last of them did: when JetStream could take and
 * hand out work again, whatever ENS does.
 */
export async function leadersAgain(
  url: string,
  lost: string,
  stream: string,
  consumers: readonly string[],
  timeoutMs = 30_000,
): Promise<number> {
  const nc = await connect({
    servers: url.split(','),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 100,
  });
  const until = Date.now() + timeoutMs;
  try {
    const subjects = [
      `$JS.API.STREAM.INFO.${stream}`,
      ...consumers.map((c) => `$JS.API.CONSUMER.INFO.${stream}.${c}`),
    ];
    let last = 0;
    for (const subject of subjects) {
      for (;;) {
        const leader = await nc.request(subject, '', { timeout: 500 }).then(
          (m) => (m.json() as { cluster?: { leader?: string } }).cluster?.leader,
          () => undefined,
        );
        if (leader && leader !== lost) break;
        if (Date.now() > until)
          throw new Error(`no leader other than ${lost} for ${subject} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 100));
      }
      last = Date.now();
    }
    return last;
  } finally {
    await nc.close();
  }
}
