import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { FakeTwilio } from '@ens/plugin-twilio/testing';
import { waitNoPending } from './drain.ts';
import { ensPool, handoffBody, handoffId, mapLimit, phones, postHandoff } from './http.ts';
import { checkAborted } from './cleanup.ts';
import { summarise, type LatencySummary } from './stats.ts';

/**
 * Empties the delivery record (the engines stay up, clients and tenants stay), so that runs that
 * are compared start alike: the pipeline slows as the record grows, and a second run on a bigger
 * record would otherwise look slower for that reason alone.
 */
export async function clearRecord(db: pg.Pool): Promise<void> {
  await db.query(
    'TRUNCATE handoffs, deliveries, attempts, delivery_events, callbacks, idempotency_keys, ' +
      'media_refs, media_objects CASCADE',
  );
  await db.query('VACUUM ANALYZE');
}

/** A client of the fairness phase: its token and the tenant it sends for. */
export interface Sender {
  clientId: string;
  token: string;
  tenant: string;
}

export interface BlastResult {
  blastDeliveries: number;
  /** The blast's deliveries per second, first accept → last sent. */
  blastRate: number;
  /** Each single's 202 → sent, from its row (created_at → sent_at). */
  singles: LatencySummary;
  singlesSent: number;
}

/**
 * `handoffs` × `perHandoff` sms for the blaster's tenant, posted at once; from then until the
 * blast has drained, one sms for the other client every `everyMs`.
 */
export async function blastWithSingles(
  baseUrl: string,
  db: pg.Pool,
  blaster: Sender,
  other: Sender,
  o: { handoffs: number; perHandoff: number; everyMs: number; offset: number },
): Promise<BlastResult> {
  const blastPool = ensPool(baseUrl, o.handoffs);
  const singlesPool = ensPool(baseUrl, 4);
  try {
    const startedAt = new Date();
    const bodies = Array.from({ length: o.handoffs }, (_, i) =>
      handoffBody(phones(o.perHandoff, o.offset + i * o.perHandoff), {
        tenant: blaster.tenant,
        eventType: 'newsletter',
      }),
    );
    const blast = mapLimit(bodies, o.handoffs, async (b) =>
      handoffId(await postHandoff(blastPool.pool, blaster.token, b)),
    );
    // Singles go on until the blast has been accepted and then sent: "no blast row pending" alone
    // is also true before its first 202 (on a busy machine the singles once stopped after five).
    let blastAnswered = false;
    void blast.then(
      () => (blastAnswered = true),
      () => (blastAnswered = true),
    );
    const singles: Promise<unknown>[] = [];
    let i = 0;
    const pendingOfBlaster = async () =>
      (
        await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM deliveries WHERE client_id = $1 AND status = 'pending'`,
          [blaster.clientId],
        )
      ).rows[0]!.n;
    await sleep(o.everyMs);
    for (;;) {
      checkAborted();
      singles.push(
        postHandoff(
          singlesPool.pool,
          other.token,
          handoffBody(phones(1, o.offset + 900_000 + i++), {
            tenant: other.tenant,
            eventType: 'auth.code',
          }),
        ).then(handoffId),
      );
      await sleep(o.everyMs);
      if (blastAnswered && i % 5 === 0 && (await pendingOfBlaster()) === 0) break;
    }
    await blast;
    await Promise.all(singles);
    await waitNoPending(db, 'fairness: singles');
    const { rows } = await db.query<{ ms: number }>(
      `SELECT extract(epoch FROM sent_at - created_at) * 1000 AS ms FROM deliveries WHERE client_id = $1 AND created_at >= $2 AND status = 'sent'`,
      [other.clientId, startedAt],
    );
    const b = await db.query<{ n: number; s: number }>(
      `SELECT count(*)::int AS n, extract(epoch FROM max(sent_at) - min(created_at)) AS s FROM deliveries WHERE client_id = $1 AND created_at >= $2`,
      [blaster.clientId, startedAt],
    );
    // extract() answers numeric, which pg hands over as a string.
    return {
      blastDeliveries: b.rows[0]!.n,
      blastRate: b.rows[0]!.n / Number(b.rows[0]!.s),
      singles: summarise(rows.map((r) => Number(r.ms))),
      singlesSent: rows.length,
    };
  } finally {
    await blastPool.close();
    await singlesPool.close();
  }
}

export interface ShareResult {
  /**
   * Seconds during which every client had work (from the last first send to the first last send).
   */
  windowS: number;
  perClient: {
    clientId: string;
    backlog: number;
    sentInWindow: number;
    rate: number;
    ofFairShare: number;
  }[];
}

/**
 * Backlogs of different sizes for each client at once; each client's sends per second while all
 * have work.
 */
export async function sharesUnderBacklogs(
  baseUrl: string,
  db: pg.Pool,
  senders: Sender[],
  backlogs: number[],
  offset: number,
): Promise<ShareResult> {
  const pool = ensPool(baseUrl, senders.length * 2);
  try {
    const startedAt = new Date();
    const PER = 10_000;
    const posts = senders.flatMap((s, k) =>
      Array.from({ length: Math.ceil(backlogs[k]! / PER) }, (_, j) => ({
        s,
        body: handoffBody(phones(PER, offset + k * 200_000 + j * PER), { tenant: s.tenant }),
      })),
    );
    await mapLimit(posts, posts.length, async (p) =>
      handoffId(await postHandoff(pool.pool, p.s.token, p.body)),
    );
    await waitNoPending(db, 'fairness: backlogs');
    const { rows } = await db.query<{ client: string; first: Date; last: Date }>(
      `SELECT client_id AS client, min(sent_at) AS first, max(sent_at) AS last FROM deliveries WHERE client_id = ANY ($1) AND created_at >= $2 GROUP BY client_id`,
      [senders.map((s) => s.clientId), startedAt],
    );
    const from = new Date(Math.max(...rows.map((r) => r.first.getTime())));
    const to = new Date(Math.min(...rows.map((r) => r.last.getTime())));
    const counts = await db.query<{ client: string; n: number }>(
      `SELECT client_id AS client, count(*)::int AS n FROM deliveries WHERE client_id = ANY ($1) AND created_at >= $2 AND sent_at BETWEEN $3 AND $4 GROUP BY client_id`,
      [senders.map((s) => s.clientId), startedAt, from, to],
    );
    const windowS = (to.getTime() - from.getTime()) / 1000;
    const total = counts.rows.reduce((a, r) => a + r.n, 0);
    return {
      windowS,
      perClient: senders.map((s, k) => {
        const n = counts.rows.find((r) => r.client === s.clientId)?.n ?? 0;
        return {
          clientId: s.clientId,
          backlog: backlogs[k]!,
          sentInWindow: n,
          rate: n / windowS,
          ofFairShare: n / (total / senders.length),
        };
      }),
    };
  } finally {
    await pool.close();
  }
}

export interface PaceResult {
  sent: number;
  rate: number;
  refusedForRate: number;
}

/**
 * A fake Twilio that refuses sends over `perSecond` in any second, for the paced ENS to send to.
 */
export async function startLimitedTwilio(
  perSecond: number,
): Promise<{ fake: FakeTwilio; baseUrl: string }> {
  const fake = new FakeTwilio();
  const baseUrl = await fake.start();
  fake.knobs.maxPerSecond = perSecond;
  return { fake, baseUrl };
}

/** `n` sms through the paced provider; the rate and refusals as the provider saw them. */
export async function pacedSends(
  baseUrl: string,
  db: pg.Pool,
  sender: Sender,
  fake: FakeTwilio,
  n: number,
  offset: number,
): Promise<PaceResult> {
  const pool = ensPool(baseUrl, 1);
  try {
    handoffId(
      await postHandoff(
        pool.pool,
        sender.token,
        handoffBody(phones(n, offset), { tenant: sender.tenant }),
      ),
    );
    await waitNoPending(db, 'pace');
    const at = [...fake.messages.values()]
      .map((m) => m.dateCreated.getTime())
      .sort((a, b) => a - b);
    return {
      sent: at.length,
      rate: (at.length - 1) / ((at.at(-1)! - at[0]!) / 1000),
      refusedForRate: fake.refusedForRate,
    };
  } finally {
    await pool.close();
  }
}
