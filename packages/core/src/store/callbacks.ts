import type { Db } from '../db/pool.ts';
import { callbackBody } from '../schemas/callback-payload.ts';
import { Coalescer } from '../db/coalescer.ts';
import { isoSql, queryByIds } from '../db/pool.ts';
import { wakeCallbacks, type CallbackWakeup, type WakeupTarget } from '../nats/wakeups.ts';
import {
  HORIZON_MS,
  LeaderChangeRewakes,
  LOOKBACK_MS,
  PLAN_LIMIT,
  type PlannedRow,
} from './leader-change-rewakes.ts';

export interface ClaimedCallback {
  id: string;
  deliveryId: string;
  clientId: string;
  url: string;
  body: string;
  /** Number of this post attempt, from 1, over the callback's whole life. */
  attempt: number;
  /** Number of this attempt since the callback was queued or last replayed, from 1. */
  attemptInRound: number;
  /** The W3C traceparent of the span that queued it (a send attempt); null when untraced. */
  traceparent: string | null;
  /**
   * Claimed by the outcome that queued it, for this process's callbacks role (InProcessPoster):
   * no wake-up went out for it, so its record wakes it again when a retry is due.
   */
  inProcess?: true;
}

/**
 * This process's callbacks role, as the outcome of a delivery sees it (DeliveryStore.finish). A
 * delivery that ends in a process that also posts callbacks has its callback claimed by the
 * outcome's own statement and handed here: no claim statement and no wake-up through NATS for it
 * (issue 27: the claim was 0.023 ms of PostgreSQL's CPU per delivery, a sixth of the whole).
 */
export interface InProcessPoster {
  /** The lease a callback claimed at its insert takes: the role's own claim lease. */
  readonly leaseMs: number;
  /** Whether a post for this client would start here soon (within the role's maxWaitMs). */
  takes(clientId: string): boolean;
  /**
   * Posts a callback claimed for this process and records it; never throws. One it cannot start
   * goes back to the queue through CallbackStore.release.
   */
  post(claim: ClaimedCallback): void;
}

export interface DeadLetter {
  id: string;
  delivery_id: string;
  client_id: string;
  url: string;
  attempts: number;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export type CallbackClaim =
  | ClaimedCallback
  | { miss: 'done' | 'leased' | 'missing' }
  | { miss: 'not_due'; dueInMs: number };

export type PostResult = { ok: boolean; httpStatus?: number; error?: string };

/*
 * Claims and records are coalesced (see Coalescer): each post's handler awaits its own result,
 * while the calls that arrive during a batch in flight go to PostgreSQL as one statement. The
 * statements are named, so each connection plans them once; "c.id = ANY($1)" repeats each join
 * so that that plan, even one made while the table was empty, reads only the batch's own rows (see
 * the delivery claim in deliveries.ts).
 */
const CLAIM_BATCH = 128;
const RECORD_BATCH = 128;
/**
 * Both commit asynchronously (see createAsyncCommitPool): one batch at a time keeps batches large.
 */
const IN_FLIGHT = 1;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const CLAIM_SQL = `
-- updated_at is left for the outcome (it orders callbacks_dead): a claim that changes no indexed
-- column is a HOT update, on the room migration 012 leaves on each page.
UPDATE callbacks c SET lease_until = now() + x.lease_ms * interval '1 millisecond', attempts = c.attempts + 1,
       claimed_by = $3
  FROM unnest($1::uuid[], $2::float8[]) AS x(id, lease_ms)
 WHERE c.id = x.id AND c.id = ANY($1::uuid[])
   -- The claiming process's session, as for deliveries (see the delivery claim in deliveries.ts).
   AND ($3::int IS NULL OR EXISTS (SELECT 1 FROM process_sessions s WHERE s.id = $3))
   -- In a CASE so that rows are found by primary key, never by scanning callbacks_due (see the
   -- delivery claim in deliveries.ts).
   AND CASE WHEN c.status = 'pending' AND c.next_attempt_at <= now() AND (c.lease_until IS NULL OR c.lease_until < now()) THEN true ELSE false END
-- A callback queued since migration 019 keeps a snapshot of its payload's changing fields, and
-- one queued since 021 no URL: the rest is its delivery's and its handoff's, read by primary key.
RETURNING c.id, c.delivery_id, c.client_id, c.url, c.body, c.snapshot, c.attempts, c.attempts - c.attempt_base AS in_round, c.traceparent,
          CASE WHEN c.body IS NULL OR c.url IS NULL THEN
            (SELECT json_build_object('delivery_id', d.id, 'reference', d.reference, 'channel', d.channel, 'recipient', d.recipient, 'url', h.callback_url)
               FROM deliveries d JOIN handoffs h ON h.id = d.handoff_id WHERE d.id = c.delivery_id) END AS delivery`;

/**
 * The callbacks of a delivery, as a condition on callbacks row `c`, with `match` the comparison
 * that names the delivery ("= d.id", "= ANY ($1::uuid[])"): its first callback has the delivery's
 * id (migration 022) and is read by primary key; any other through callbacks_delivery, which
 * holds only those.
 */
export function callbacksOfSql(c: string, match: string): string {
  return `(${c}.id ${match} OR (${c}.delivery_id ${match} AND ${c}.id <> ${c}.delivery_id))`;
}

/**
 * Where callback `c` is posted: its handoff's callback_url (migration 021), or the URL a callback
 * queued before kept. For the read models; the claim reads it with the delivery (CLAIM_SQL).
 */
export function callbackUrlSql(c: string): string {
  return `coalesce(${c}.url, (SELECT h.callback_url FROM deliveries d JOIN handoffs h ON h.id = d.handoff_id WHERE d.id = ${c}.delivery_id))`;
}

const CLAIM_MISS_SQL = `
SELECT id, status, coalesce(lease_until > now(), false) AS leased,
       greatest(0, extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS due_ms
  FROM callbacks WHERE id = ANY($1::uuid[])`;

/*
 * A successful post is recorded by the row alone (migration 018): status 'delivered', attempts its
 * number, updated_at its time, last_http_status its answer. Only failed posts (a retry, or dead)
 * get a callback_attempts row, which saves its ~170 bytes of WAL on every delivered callback; the
 * console's list of a callback's posts puts the two together (read-models/console-deliveries.ts).
 * A delivered row is final: claims take only pending ones and a replay only dead ones, so nothing
 * overwrites the success it records.
 */
const RECORD_SQL = `
WITH u AS (
  UPDATE callbacks c SET status = x.status, lease_until = NULL, last_error = x.error, last_http_status = x.http_status,
         updated_at = now(), next_attempt_at = now() + coalesce(x.retry_ms, 0) * interval '1 millisecond'
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::float8[], $5::int[], $6::int[]) AS x(id, status, error, retry_ms, attempt, http_status)
   WHERE c.id = x.id AND c.attempts = x.attempt AND c.id = ANY($1::uuid[])
  RETURNING c.id, x.status, x.attempt, x.http_status, x.error)
INSERT INTO callback_attempts (callback_id, number, http_status, error)
SELECT id, attempt, http_status, error FROM u WHERE status <> 'delivered'`;

/*
 * Gives back a claim taken at the callback's insert whose post never started (the role was
 * stopping, or the client's receiver turned slow): the row is as the insert would have left it
 * unclaimed, and its wake-up goes out. Versioned by the attempt the claim counted.
 */
const RELEASE_SQL = `
UPDATE callbacks SET lease_until = NULL, claimed_by = NULL, attempts = attempts - 1
 WHERE id = $1 AND attempts = $2 AND status = 'pending' AND lease_until IS NOT NULL
RETURNING id, client_id AS "clientId"`;

/*
 * A wake-up handed back to the queue for a while (the callbacks role defers posts that would wait
 * behind their client's slow receiver) must not look lost to the sweeper meanwhile, or every
 * ENS_SWEEP_GRACE would add another wake-up for the same callback. So the sweeper is held off until
 * the wake-up is due back: it re-wakes the callback only if that one is lost after all.
 */
const HOLD_OFF_SQL = `
UPDATE callbacks c SET swept_at = greatest(c.swept_at, now() + x.hold_ms * interval '1 millisecond')
  FROM unnest($1::uuid[], $2::float8[]) AS x(id, hold_ms)
 WHERE c.id = x.id AND c.id = ANY($1::uuid[])
   -- In a CASE so that the rows are found by primary key, never by scanning callbacks_due.
   AND CASE WHEN c.status = 'pending' THEN true ELSE false END`;
const HOLD_OFF_BATCH = 1000;

interface HoldOffRequest {
  id: string;
  holdMs: number;
}

/*
 * The callbacks a leader change of their consumer may have left waiting on a lost nak
 * (leader-change-rewakes.ts), as for deliveries: two range reads of callbacks_due.
 */
const REWAKE_PLAN_SQL = `
(SELECT id, (extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS "dueInMs"
   FROM callbacks
  WHERE status = 'pending' AND (lease_until IS NULL OR lease_until < now())
    AND next_attempt_at > now() - $1 * interval '1 millisecond' AND next_attempt_at <= now()
  ORDER BY next_attempt_at DESC LIMIT $3)
UNION ALL
(SELECT id, (extract(epoch FROM next_attempt_at - now()) * 1000)::float8
   FROM callbacks
  WHERE status = 'pending' AND (lease_until IS NULL OR lease_until < now())
    AND next_attempt_at > now() AND next_attempt_at <= now() + $2 * interval '1 millisecond'
  ORDER BY next_attempt_at LIMIT $3)`;

/**
 * Those of a plan's callbacks still waiting, by primary key; one handed back for a while (held
 * off, see HOLD_OFF_SQL) is left to its own wake-up.
 */
const REWAKE_PASS_SQL = `
SELECT id, client_id AS "clientId" FROM callbacks
 WHERE id = ANY($1::uuid[])
   AND CASE WHEN status = 'pending' AND next_attempt_at <= now()
                 AND (lease_until IS NULL OR lease_until < now())
                 AND (swept_at IS NULL OR swept_at <= now()) THEN true ELSE false END`;

interface ClaimRequest {
  id: string;
  leaseMs: number;
}

interface RecordRequest {
  id: string;
  status: 'delivered' | 'pending' | 'dead';
  error: string | null;
  retryInMs: number | null;
  attempt: number;
  httpStatus: number | null;
}

export class CallbackStore {
  readonly #claims: Coalescer<ClaimRequest, CallbackClaim>;
  readonly #records: Coalescer<RecordRequest, undefined>;
  readonly #holdOffs: Coalescer<HoldOffRequest, undefined>;
  readonly #wake: WakeupTarget | null;
  readonly #session: { id(): number | null } | null;
  readonly #rewakes: LeaderChangeRewakes<'callbacks'> | null;

  /**
   * @param leases a pool with asynchronous commit (see createAsyncCommitPool), for claims and attempt records
   * @param wake where callbacks put back in the queue (replays, the sweeper's) are woken after the commit
   * @param session this process's session (store/process-sessions.ts), which claims record
   */
  constructor(
    private readonly db: Db,
    private readonly leases: Db = db,
    wake: WakeupTarget | null = null,
    session: { id(): number | null } | null = null,
  ) {
    this.#wake = wake;
    this.#session = session;
    this.#claims = new Coalescer((reqs) => this.#claimBatch(reqs), {
      maxBatch: CLAIM_BATCH,
      maxInFlight: IN_FLIGHT,
    });
    this.#records = new Coalescer((reqs) => this.#recordBatch(reqs), {
      maxBatch: RECORD_BATCH,
      maxInFlight: IN_FLIGHT,
    });
    this.#holdOffs = new Coalescer((reqs) => this.#holdOffBatch(reqs), {
      maxBatch: HOLD_OFF_BATCH,
      flush: 'end-of-turn',
    });
    this.#rewakes = wake
      ? new LeaderChangeRewakes<'callbacks'>({
          plan: async () =>
            (
              await this.db.query<PlannedRow>(REWAKE_PLAN_SQL, [
                LOOKBACK_MS,
                HORIZON_MS,
                PLAN_LIMIT,
              ])
            ).rows,
          pass: async (_key, ids) => {
            const { rows } = await this.db.query<CallbackWakeup>(REWAKE_PASS_SQL, [ids]);
            this.#wakeAll(rows);
            return rows.length;
          },
          logger: wake.logger,
          kind: 'callback',
        })
      : null;
  }

  /**
   * After the callbacks consumer elected a JetStream leader: wakes, each shortly after its due
   * time, the callbacks whose nak the old leader may have answered and then lost
   * (leader-change-rewakes.ts). Never throws; a store without a wake-up target does nothing.
   */
  afterLeaderChange(): void {
    this.#rewakes?.afterLeaderChange('callbacks');
  }

  /**
   * Keeps the sweeper off a pending callback for `holdMs`, because its wake-up was handed back to
   * the queue for that long (see HOLD_OFF_SQL).
   */
  holdOff(id: string, holdMs: number): Promise<void> {
    if (!UUID.test(id)) return Promise.resolve();
    return this.#holdOffs.call({ id: id.toLowerCase(), holdMs });
  }

  async #holdOffBatch(reqs: HoldOffRequest[]): Promise<undefined[]> {
    await queryByIds(this.leases, {
      name: 'ens-hold-off-callbacks',
      text: HOLD_OFF_SQL,
      values: [reqs.map((r) => r.id), reqs.map((r) => r.holdMs)],
    });
    return reqs.map(() => undefined);
  }

  /**
   * Leases a due callback for one post; a miss when it is not due, leased elsewhere or finished.
   */
  claim(id: string, leaseMs: number): Promise<CallbackClaim> {
    if (!UUID.test(id)) return Promise.resolve({ miss: 'missing' });
    return this.#claims.call({ id: id.toLowerCase(), leaseMs });
  }

  async #claimBatch(reqs: ClaimRequest[]): Promise<CallbackClaim[]> {
    const { rows } = await queryByIds(this.leases, {
      name: 'ens-claim-callbacks',
      text: CLAIM_SQL,
      values: [reqs.map((r) => r.id), reqs.map((r) => r.leaseMs), this.#session?.id() ?? null],
    });
    const claimed = new Map<string, ClaimedCallback>();
    for (const r of rows) {
      claimed.set(r.id, {
        id: r.id,
        deliveryId: r.delivery_id,
        clientId: r.client_id,
        url: r.url ?? r.delivery.url,
        body: r.body ?? callbackBody(r.delivery, r.snapshot),
        attempt: r.attempts,
        attemptInRound: r.in_round,
        traceparent: r.traceparent,
      });
    }
    // Each claimed row goes to the first request that named it; any other request is a miss.
    const out: (CallbackClaim | null)[] = reqs.map((r) => {
      const c = claimed.get(r.id);
      if (!c) return null;
      claimed.delete(r.id);
      return c;
    });
    const missed = reqs.filter((_, i) => out[i] === null).map((r) => r.id);
    if (missed.length === 0) return out as CallbackClaim[];
    const why = await this.db.query<{
      id: string;
      status: string;
      leased: boolean;
      due_ms: number;
    }>({
      name: 'ens-claim-callbacks-missed',
      text: CLAIM_MISS_SQL,
      values: [[...new Set(missed)]],
    });
    const byId = new Map(why.rows.map((w) => [w.id, w]));
    return out.map((o, i): CallbackClaim => {
      if (o !== null) return o;
      const w = byId.get(reqs[i]!.id);
      if (!w) return { miss: 'missing' };
      if (w.status !== 'pending') return { miss: 'done' };
      if (w.leased) return { miss: 'leased' };
      return { miss: 'not_due', dueInMs: Math.ceil(w.due_ms) };
    });
  }

  /**
   * Records one post. `retryInMs` null means no retry is left: a failure then becomes a dead
   * letter that an operator can replay.
   */
  async record(
    cb: ClaimedCallback,
    result: PostResult,
    retryInMs: number | null,
  ): Promise<'delivered' | 'pending' | 'dead'> {
    const status = result.ok ? 'delivered' : retryInMs === null ? 'dead' : 'pending';
    await this.#records.call({
      id: cb.id,
      status,
      error: result.ok ? null : (result.error ?? 'failed'),
      retryInMs,
      attempt: cb.attempt,
      httpStatus: result.httpStatus ?? null,
    });
    // A callback claimed at its insert had no wake-up to put back in the queue: its retry gets one
    // now, which the role holds until the retry is due (the claim's not_due miss).
    if (status === 'pending' && cb.inProcess) this.#wakeAll([{ id: cb.id, clientId: cb.clientId }]);
    return status;
  }

  /**
   * Gives back a claim taken at the callback's insert (InProcessPoster) whose post never started,
   * and wakes the callback, after the commit, for whichever process takes it. Never throws: one
   * left claimed is woken when its lease runs out (the sweeper) or its process's session ends.
   */
  async release(cb: ClaimedCallback): Promise<void> {
    try {
      const { rows } = await this.db.query<CallbackWakeup>({
        name: 'ens-release-callback',
        text: RELEASE_SQL,
        values: [cb.id, cb.attempt],
      });
      this.#wakeAll(rows);
    } catch (err) {
      this.#wake?.logger.warn({ err, callbackId: cb.id }, 'could not give back a callback claim');
    }
  }

  async #recordBatch(reqs: RecordRequest[]): Promise<undefined[]> {
    const col = <K extends keyof RecordRequest>(k: K) => reqs.map((r) => r[k]);
    await queryByIds(this.leases, {
      name: 'ens-record-callbacks',
      text: RECORD_SQL,
      values: [
        col('id'),
        col('status'),
        col('error'),
        col('retryInMs'),
        col('attempt'),
        col('httpStatus'),
      ],
    });
    return reqs.map(() => undefined);
  }

  async listDead(opts: { clientId?: string; limit: number }): Promise<DeadLetter[]> {
    const { rows } = await this.db.query<DeadLetter>(
      `SELECT id, delivery_id, client_id, ${callbackUrlSql('callbacks')} AS url, attempts, last_error, ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at
         FROM callbacks WHERE status = 'dead' AND ($1::text IS NULL OR client_id = $1) ORDER BY updated_at LIMIT $2`,
      [opts.clientId ?? null, opts.limit],
    );
    return rows;
  }

  /**
   * Puts dead letters back in the queue (by id, or all of a client's) and wakes the callbacks role
   * for them after the commit; returns them. Only dead ones: a delivered row is the record of its
   * successful post (see RECORD_SQL), which a replay must never overwrite.
   */
  async replay(sel: { ids?: string[]; clientId?: string }): Promise<CallbackWakeup[]> {
    const { rows } = await this.db.query<CallbackWakeup>(
      `UPDATE callbacks SET status = 'pending', next_attempt_at = now(), lease_until = NULL, attempt_base = attempts, updated_at = now()
        WHERE status = 'dead' AND ($1::uuid[] IS NULL OR id = ANY($1)) AND ($2::text IS NULL OR client_id = $2)
       RETURNING id, client_id AS "clientId"`,
      [sel.ids ?? null, sel.clientId ?? null],
    );
    this.#wakeAll(rows);
    return rows;
  }

  /**
   * Pending callbacks whose wake-up was lost: pushes their due time by the grace (see
   * DeliveryStore.takeOverdue), wakes the callbacks role for them again, and returns them.
   */
  async takeOverdue(graceMs: number, limit: number): Promise<CallbackWakeup[]> {
    const { rows } = await this.db.query<CallbackWakeup>(
      `UPDATE callbacks SET swept_at = now()
        WHERE id IN (SELECT id FROM callbacks
                      WHERE status = 'pending' AND next_attempt_at < now() - $1 * interval '1 millisecond'
                        AND (lease_until IS NULL OR lease_until < now())
                        AND (swept_at IS NULL OR swept_at < now() - $1 * interval '1 millisecond')
                      ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING id, client_id AS "clientId"`,
      [graceMs, limit],
    );
    this.#wakeAll(rows);
    return rows;
  }

  /**
   * After a commit that put callbacks (back) in the queue: the callbacks role's wake-ups. Never
   * throws.
   */
  #wakeAll(callbacks: readonly CallbackWakeup[]): void {
    if (this.#wake && callbacks.length > 0)
      wakeCallbacks(this.#wake.nc, callbacks, this.#wake.logger);
  }
}
