import type { RecipientRefusal } from '@ens/plugin-sdk';
import type { Db, DbClient } from '../db/pool.ts';
import { Coalescer } from '../db/coalescer.ts';
import { inTransaction, isoSql, queryByIds } from '../db/pool.ts';
import { newId } from '../ids.ts';
import { callbackBody, callbackSnapshot } from '../schemas/callback-payload.ts';
import type { Channel } from '../schemas/channel.ts';
import type { CallbackPayload } from '../schemas/delivery.ts';
import {
  wakeCallbacks,
  wakeFeed,
  wakeSenders,
  type CallbackWakeup,
  type SendWakeup,
  type WakeupTarget,
} from '../nats/wakeups.ts';
import { CHANNEL_RULES } from '../domain/channels.ts';
import { lostAttemptsSql } from './attempt-rows.ts';
import type { ClaimedCallback, InProcessPoster } from './callbacks.ts';
import { CALLBACK_FIELDS, recordColumns } from '../domain/delivery-record.ts';
import { formatTimestamp } from '../timestamps.ts';
import {
  HORIZON_MS,
  LeaderChangeRewakes,
  LOOKBACK_MS,
  PLAN_LIMIT,
  type PlannedRow,
} from './leader-change-rewakes.ts';
import {
  suppressedSql,
  suppressionError,
  suppressionMatchSql,
  type SuppressionHit,
} from './suppressions.ts';

/** What a worker holds after claiming a delivery for one attempt. */
export interface ClaimedDelivery {
  id: string;
  version: number;
  /** The number of this attempt, counting from 1. */
  attempt: number;
  clientId: string;
  handoffId: string;
  tenant: string;
  eventType: string;
  reference: string | null;
  channel: Channel;
  recipient: string;
  content: Record<string, unknown>;
  tenantSettings: Record<string, unknown>;
  /** True when a terminal state must produce a callback (URL given and client has a secret). */
  wantsCallback: boolean;
  /** Where that callback goes (the handoff's callback_url); when absent, it is read when posted. */
  callbackUrl?: string | null;
  /**
   * The W3C traceparent of the span that accepted the handoff; null when it was accepted untraced.
   */
  traceparent: string | null;
  /** The client marks this event type as bulk: an email carries one-click unsubscribe headers. */
  bulk: boolean;
}

/** `suppressed`: the delivery is pending and due, but an entry of the suppression list stops it. */
export type ClaimMiss =
  | { reason: 'done' }
  | { reason: 'not_due'; dueInMs: number }
  | { reason: 'leased' }
  | { reason: 'missing' }
  | { reason: 'suppressed'; hit: SuppressionHit };

export type AttemptResult =
  | { outcome: 'sent'; provider: string; providerMessageId: string }
  | {
      outcome: 'retry';
      provider: string;
      error: string;
      delayMs: number;
      kind: 'transient' | 'rate_limited';
    }
  | {
      outcome: 'failed';
      provider: string;
      error: string;
      kind: 'permanent' | 'transient' | 'rate_limited';
      recipientRefusal?: RecipientRefusal;
      recipientEventTypeOnly?: boolean;
    };

export interface Transition {
  status: 'pending' | 'sent' | 'failed';
  /** Set when the transition queued a callback post. */
  callbackId: string | null;
}

export interface StatusReport {
  provider: string;
  providerMessageId: string;
  kind: 'delivered' | 'read' | 'failed';
  at: Date;
  error?: string;
}

/*
 * Claims and finishes are coalesced (see Coalescer): the handlers of a work queue each await their
 * own result, but the calls that arrive while a batch is in flight go to PostgreSQL together, as
 * one statement and one transaction. Each row still gets exactly the transition it would get alone:
 * the WHERE clauses are per row, so a batch is only a cheaper way to run the same updates. The
 * statements are named, so each connection plans them once (planning took about a fifth of their
 * time in the bench).
 */
const CLAIM_BATCH = 128;
const FINISH_BATCH = 128;
/*
 * Claims commit asynchronously (no WAL flush to wait for), so one batch at a time keeps batches
 * large. A finish waits for its commit to reach disk; a second batch in flight overlaps that wait.
 */
const CLAIMS_IN_FLIGHT = 1;
const FINISHES_IN_FLIGHT = 2;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The row as a transition found it, for its RETURNING list: the attempt its claim left open (a
 * lease still set), as {provider, claimed_at}, or null when none was. A statement does not see its
 * own changes, so this reads the version it replaced (one probe by primary key per row).
 */
const OPEN_BEFORE_RETURNING = `(SELECT json_build_object('provider', o.provider, 'claimed_at', o.claimed_at)
    FROM deliveries o WHERE o.id = d.id AND o.lease_until IS NOT NULL) AS open_before`;

/** What a lost attempt says when a later transition found its claim's lease run out. */
const LAPSED_CLAIM_ERROR = 'worker stopped during the attempt';

interface OpenBefore {
  open_before: { provider: string | null; claimed_at: string | null } | null;
}

const CLAIM_SQL = `
WITH x AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::float8[]) AS x(id, provider, lease_ms)
), c AS (
  -- No indexed column changes here, so the claim is a HOT update; the attempt's outcome restamps
  -- the row for the feed. A row named twice in one batch is updated once (the later one then finds it leased).
  -- The claimable test sits in a CASE so that the planner cannot use it to pick deliveries_due (a
  -- partial index on pending rows): that index holds an entry for every row that was pending since
  -- the last vacuum, and scanning it costs the whole backlog. Rows are found by primary key only.
  -- "= ANY($1)" repeats the join for the planner: the session keeps one generic plan, possibly made
  -- while the tables were empty, and with it any plan reads only the batch's own rows
  -- (hot-statement-plans.test.ts: without it, every claim read all of attempts).
  -- claimed_by names the claiming process's session (store/process-sessions.ts): when it dies, its
  -- claims are ended at once. A session already ended (this process was paused) claims nothing.
  -- The claim also names the attempt's provider and time on the row: the attempt in flight is the
  -- row itself, and its attempts row is written once, when it ends (migration 017).
  -- A lease still set on the row as it was is a claim that ended without an outcome (an outcome,
  -- and a dead session's end, clear it), whose attempt this claim records as lost.
  UPDATE deliveries d SET lease_until = now() + x.lease_ms * interval '1 millisecond', attempts = d.attempts + 1,
         version = d.version + 1, claimed_by = $4, claimed_at = now(), provider = x.provider
    FROM x
   WHERE d.id = x.id AND d.id = ANY($1::uuid[])
     AND ($4::int IS NULL OR EXISTS (SELECT 1 FROM process_sessions s WHERE s.id = $4))
     AND CASE WHEN d.status = 'pending' AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now()) THEN true ELSE false END
     -- Consent is read here, in the claim itself, so an entry committed at any time before it (even
     -- after the accept) stops the send; a suppressed row is not claimed, and the miss path fails it.
     AND NOT ${suppressedSql('d')}
  RETURNING d.id, d.version, d.attempts, d.client_id, d.handoff_id, d.tenant, d.event_type, d.reference, d.channel, d.recipient, x.provider,
            ${OPEN_BEFORE_RETURNING}
), lost AS (
  ${lostAttemptsSql(
    `SELECT id, attempts - 1, open_before->>'provider', (open_before->>'claimed_at')::timestamptz, '${LAPSED_CLAIM_ERROR}'
       FROM c WHERE open_before IS NOT NULL`,
  )}
)
SELECT c.id, c.version, c.attempts, c.client_id, c.handoff_id, c.tenant, c.event_type, c.reference, c.channel, c.recipient,
       h.content, h.traceparent, coalesce(t.settings, '{}'::jsonb) AS tenant_settings,
       (h.callback_url IS NOT NULL AND cl.has_secret) AS wants_callback, h.callback_url, cl.bulk
  FROM c
  -- Each claimed row's handoff, client and tenant, looked up by key: OFFSET 0 keeps each lookup a
  -- subquery run per row, so no plan (a generic one made while the tables were empty) can scan them.
  CROSS JOIN LATERAL (SELECT h.messages -> c.channel AS content, h.callback_url, h.traceparent FROM handoffs h WHERE h.id = c.handoff_id OFFSET 0) h
  CROSS JOIN LATERAL (SELECT cl.callback_secret_enc IS NOT NULL AS has_secret, c.event_type = ANY (cl.bulk_event_types) AS bulk
                        FROM clients cl WHERE cl.id = c.client_id OFFSET 0) cl
  LEFT JOIN LATERAL (SELECT t.settings FROM tenants t WHERE t.client_id = c.client_id AND t.id = c.tenant OFFSET 0) t ON true`;

const CLAIM_MISS_SQL = `
SELECT d.id, d.status, greatest(0, extract(epoch FROM d.next_attempt_at - now()) * 1000)::float8 AS due_ms,
       coalesce(d.lease_until > now(), false) AS leased,
       hit.reason AS hit_reason, hit.scope AS hit_scope, hit.address AS hit_address, hit.since AS hit_since, hit.source AS hit_source, hit.detail AS hit_detail
  FROM deliveries d
  LEFT JOIN LATERAL (
    SELECT s.reason, s.scope, s.address, ${isoSql('s.created_at')} AS since, s.source, s.detail
      FROM suppressions s JOIN clients sc ON sc.id = s.client_id
     WHERE d.status = 'pending' AND ${suppressionMatchSql('d')}
     ORDER BY s.created_at LIMIT 1) hit ON true
 WHERE d.id = ANY($1::uuid[])`;

const FINISH_SQL = `
WITH x AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[], $8::float8[],
                       $9::text[], $10::int[], $11::text[], $12::text[], $13::text[], $14::float8[])
    WITH ORDINALITY AS x(id, version, status, provider, provider_message_id, sent_at, error, delay_ms, outcome, number, client_id, snapshot, traceparent, callback_lease_ms, n)
), live AS (
  -- A callback claimed at its insert names this process's session, as every claim does; a session
  -- already ended (this process was paused) claims none, and they go out as wake-ups.
  SELECT $15::int IS NOT NULL AND EXISTS (SELECT 1 FROM process_sessions s WHERE s.id = $15) AS ok
), clock AS (
  -- The outcome stamps its rows for the feed itself, as the feed role would (store/feed.ts): from
  -- the one feed clock, whose row lock is held until commit, so stamps still follow commit order
  -- (DESIGN invariant 3). That saves the row a second write that is not HOT (updated_at is
  -- indexed): 0.75 KB less WAL per delivery. Taken at the first row's update, before its row lock.
  SELECT last FROM feed_clock WHERE id = 1 FOR UPDATE
), base AS (
  SELECT greatest(clock_timestamp(), clock.last + interval '1 microsecond') AS t FROM clock
), d AS (
  -- Versioned per row: a result whose lease ran out (the version moved on) changes nothing.
  UPDATE deliveries d SET status = x.status, provider = x.provider, provider_message_id = coalesce(x.provider_message_id, d.provider_message_id),
         sent_at = coalesce(x.sent_at, d.sent_at), last_error = x.error,
         next_attempt_at = CASE WHEN x.status = 'pending' THEN now() + x.delay_ms * interval '1 millisecond' ELSE d.next_attempt_at END,
         lease_until = NULL, version = d.version + 1, stamp_pending = false,
         updated_at = (SELECT t FROM base) + (x.n - 1) * interval '1 microsecond'
    FROM x, live
   WHERE d.id = x.id AND d.version = x.version
  RETURNING d.id, d.updated_at, d.claimed_at, x.version, x.outcome, x.number, x.provider, x.provider_message_id, x.error, x.client_id, x.snapshot, x.traceparent,
            x.snapshot IS NOT NULL AND x.callback_lease_ms IS NOT NULL AND live.ok AS claim_callback, x.callback_lease_ms
), tick AS (
  UPDATE feed_clock SET last = s.last
    FROM (SELECT max(updated_at) AS last FROM d) s
   WHERE feed_clock.id = 1 AND s.last IS NOT NULL
), a AS (
  -- The attempt's one row (migration 017). The provider is the one that answered: with fail-over,
  -- it may not be the one claimed for. No other writer can have written this number: one that
  -- records a lost attempt moves the version on first, so this outcome would not have applied.
  INSERT INTO attempts (delivery_id, number, provider, started_at, finished_at, outcome, provider_message_id, error)
  SELECT id, number, provider, coalesce(claimed_at, now()), now(), outcome, provider_message_id, error FROM d
), cb AS (
  -- The delivery's first callback, keyed by the delivery's id: a terminal state is reached once
  -- (migration 022). It keeps its payload's changing fields; the body is built from them and the
  -- delivery's unchanging ones, and the URL is the handoff's, when posted (migrations 019, 021).
  -- One this process's callbacks role will post is claimed here, as its claim would (store/callbacks.ts):
  -- attempt 1, leased to this session (DeliveryStore.postCallbacksHere).
  INSERT INTO callbacks (id, delivery_id, client_id, snapshot, traceparent, attempts, lease_until, claimed_by)
  SELECT id, id, client_id, snapshot, traceparent,
         CASE WHEN claim_callback THEN 1 ELSE 0 END,
         CASE WHEN claim_callback THEN now() + callback_lease_ms * interval '1 millisecond' END,
         CASE WHEN claim_callback THEN $15::int END
    FROM d WHERE snapshot IS NOT NULL
)
SELECT id, version, claim_callback AS callback_claimed FROM d`;

/*
 * What a transition that ends a delivery outside an attempt (suppressed, reported failed) returns:
 * the callback payload as the row now holds it, read with the record's own columns, and whether a
 * callback is wanted (the handoff has a URL, which the callback reads from it when posted, and the
 * client a secret to sign it with).
 */
const CALLBACK_RETURNING = `${recordColumns('d', CALLBACK_FIELDS)}, d.client_id, h.traceparent,
  (h.callback_url IS NOT NULL AND cl.callback_secret_enc IS NOT NULL) AS wants_callback`;

type EndedRow = CallbackPayload & {
  client_id: string;
  traceparent: string | null;
  wants_callback: boolean;
};

/**
 * Queues the callback of a delivery that a transition just ended (a CALLBACK_RETURNING row):
 * `first` when the transition is the delivery's terminal state, whose callback is keyed by the
 * delivery's id (migration 022); a later one (a failure reported after sending) gets an id of its
 * own.
 */
async function queueEndedCallback(
  c: DbClient,
  f: EndedRow | undefined,
  which: 'first' | 'later',
): Promise<CallbackWakeup | null> {
  if (!f?.wants_callback) return null;
  const callbackId = which === 'first' ? f.delivery_id : newId();
  await c.query(
    'INSERT INTO callbacks (id, delivery_id, client_id, snapshot, traceparent) VALUES ($1, $2, ' +
      '$3, $4, $5)',
    [callbackId, f.delivery_id, f.client_id, callbackSnapshot(f), f.traceparent],
  );
  return { id: callbackId, clientId: f.client_id };
}

/*
 * A channel's rows a leader change of its consumer may have left waiting on a lost nak
 * (leader-change-rewakes.ts): pending and unleased, due from $2 ms before now to $3 ms after, the
 * nearest $4 each side. Both halves are range reads of deliveries_due.
 */
const REWAKE_PLAN_SQL = `
(SELECT id, (extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS "dueInMs"
   FROM deliveries
  WHERE status = 'pending' AND channel = $1 AND (lease_until IS NULL OR lease_until < now())
    AND next_attempt_at > now() - $2 * interval '1 millisecond' AND next_attempt_at <= now()
  ORDER BY next_attempt_at DESC LIMIT $4)
UNION ALL
(SELECT id, (extract(epoch FROM next_attempt_at - now()) * 1000)::float8
   FROM deliveries
  WHERE status = 'pending' AND channel = $1 AND (lease_until IS NULL OR lease_until < now())
    AND next_attempt_at > now() AND next_attempt_at <= now() + $3 * interval '1 millisecond'
  ORDER BY next_attempt_at LIMIT $4)`;

/** Those of a plan's rows still waiting, by primary key (the CASE keeps the due index out). */
const REWAKE_PASS_SQL = `
SELECT id, channel, client_id AS "clientId", tenant, event_type AS "eventType" FROM deliveries
 WHERE id = ANY($1::uuid[])
   AND CASE WHEN status = 'pending' AND next_attempt_at <= now()
                 AND (lease_until IS NULL OR lease_until < now()) THEN true ELSE false END`;

interface ClaimRequest {
  id: string;
  provider: string;
  leaseMs: number;
}

interface FinishRequest {
  id: string;
  version: number;
  status: Transition['status'];
  provider: string;
  providerMessageId: string | null;
  sentAt: string | null;
  error: string | null;
  delayMs: number;
  attemptOutcome: string;
  attempt: number;
  clientId: string;
  snapshot: string | null;
  traceparent: string | null;
  /** The lease of the callback it queues when this process's callbacks role will post it; else null. */
  callbackLeaseMs: number | null;
}

/**
 * The callback an outcome claimed at its insert, as the callbacks role's claim would have returned
 * it (store/callbacks.ts): its first post, its body built from the same snapshot.
 */
function inProcessClaim(
  d: ClaimedDelivery,
  snapshot: string,
  traceparent: string | null,
): ClaimedCallback {
  return {
    id: d.id,
    deliveryId: d.id,
    clientId: d.clientId,
    url: d.callbackUrl!,
    body: callbackBody(
      { delivery_id: d.id, reference: d.reference, channel: d.channel, recipient: d.recipient },
      snapshot,
    ),
    attempt: 1,
    attemptInRound: 1,
    traceparent,
    inProcess: true,
  };
}

/** What an outcome did: null when its version had moved on, else whether it claimed its callback. */
type Finished = { callbackClaimed: boolean } | null;

export class DeliveryStore {
  readonly #claims: Coalescer<ClaimRequest, ClaimedDelivery | ClaimMiss>;
  readonly #finishes: Coalescer<FinishRequest, Finished>;
  #poster: InProcessPoster | null = null;

  readonly #leases: Db;
  readonly #keyed: Db;
  readonly #wake: WakeupTarget | null;
  readonly #session: { id(): number | null } | null;
  readonly #rewakes: LeaderChangeRewakes<Channel> | null;

  /**
   * @param pools.leases a pool with asynchronous commit (see createAsyncCommitPool), for claims only
   * @param pools.keyed the pool for outcomes; both best made with createPool's `byIds` (see queryByIds)
   * @param wake where the next stage's wake-ups go after each transition's commit (the feed's, the
   *   callbacks role's, the senders' for swept deliveries); none are published without it
   * @param session this process's session (store/process-sessions.ts), which claims record
   */
  constructor(
    private readonly db: Db,
    pools: { leases?: Db; keyed?: Db } = {},
    wake: WakeupTarget | null = null,
    session: { id(): number | null } | null = null,
  ) {
    this.#wake = wake;
    this.#session = session;
    this.#leases = pools.leases ?? db;
    this.#keyed = pools.keyed ?? db;
    this.#claims = new Coalescer((reqs) => this.#claimBatch(reqs), {
      maxBatch: CLAIM_BATCH,
      maxInFlight: CLAIMS_IN_FLIGHT,
    });
    this.#finishes = new Coalescer((reqs) => this.#finishBatch(reqs), {
      maxBatch: FINISH_BATCH,
      maxInFlight: FINISHES_IN_FLIGHT,
    });
    this.#rewakes = wake
      ? new LeaderChangeRewakes<Channel>({
          plan: async (channel) =>
            (
              await this.db.query<PlannedRow>(REWAKE_PLAN_SQL, [
                channel,
                LOOKBACK_MS,
                HORIZON_MS,
                PLAN_LIMIT,
              ])
            ).rows,
          pass: async (_channel, ids) => {
            const { rows } = await this.db.query<SendWakeup>(REWAKE_PASS_SQL, [ids]);
            if (rows.length > 0) wakeSenders(wake.nc, rows, wake.logger);
            return rows.length;
          },
          logger: wake.logger,
          kind: 'delivery',
        })
      : null;
  }

  /**
   * After the channel's send consumer elected a JetStream leader: wakes, each shortly after its due
   * time, the channel's retries whose nak the old leader may have answered and then lost
   * (leader-change-rewakes.ts). Never throws; a store without a wake-up target does nothing.
   */
  afterLeaderChange(channel: Channel): void {
    this.#rewakes?.afterLeaderChange(channel);
  }

  /**
   * Takes a delivery for one attempt: bumps its attempt count and leases it for leaseMs, under this
   * process's session. A dead process's claims are ended when its session is found dead (or, at
   * the latest, when the lease runs out), and its unfinished attempt is then marked `lost`.
   */
  claim(id: string, provider: string, leaseMs: number): Promise<ClaimedDelivery | ClaimMiss> {
    // Not an id this service issues (a stray message on the subject): nothing to claim, and it must
    // not fail the batch it would have joined.
    if (!UUID.test(id)) return Promise.resolve({ reason: 'missing' });
    return this.#claims.call({ id: id.toLowerCase(), provider, leaseMs });
  }

  async #claimBatch(reqs: ClaimRequest[]): Promise<(ClaimedDelivery | ClaimMiss)[]> {
    const { rows } = await queryByIds(this.#leases, {
      name: 'ens-claim-deliveries',
      text: CLAIM_SQL,
      values: [
        reqs.map((r) => r.id),
        reqs.map((r) => r.provider),
        reqs.map((r) => r.leaseMs),
        this.#session?.id() ?? null,
      ],
    });
    const claimed = new Map<string, ClaimedDelivery>();
    for (const r of rows) {
      claimed.set(r.id, {
        id: r.id,
        version: r.version,
        attempt: r.attempts,
        clientId: r.client_id,
        handoffId: r.handoff_id,
        tenant: r.tenant,
        eventType: r.event_type,
        reference: r.reference,
        channel: r.channel,
        recipient: r.recipient,
        content: r.content ?? {},
        tenantSettings: r.tenant_settings,
        wantsCallback: r.wants_callback,
        callbackUrl: r.callback_url,
        traceparent: r.traceparent,
        bulk: r.bulk === true,
      });
    }
    // Each claimed row goes to the first request that named it; any other request is a miss.
    const out: (ClaimedDelivery | ClaimMiss | null)[] = reqs.map((r) => {
      const c = claimed.get(r.id);
      if (!c) return null;
      claimed.delete(r.id);
      return c;
    });
    const missed = reqs.filter((_, i) => out[i] === null).map((r) => r.id);
    if (missed.length === 0) return out as ClaimedDelivery[];
    const why = await this.db.query<{
      id: string;
      status: string;
      due_ms: number;
      leased: boolean;
      hit_reason: SuppressionHit['reason'] | null;
      hit_scope: string;
      hit_address: string;
      hit_since: string;
      hit_source: SuppressionHit['source'];
      hit_detail: string | null;
    }>({
      name: 'ens-claim-deliveries-missed',
      text: CLAIM_MISS_SQL,
      values: [[...new Set(missed)]],
    });
    const byId = new Map(why.rows.map((w) => [w.id, w]));
    return out.map((o, i): ClaimedDelivery | ClaimMiss => {
      if (o !== null) return o;
      const w = byId.get(reqs[i]!.id);
      if (!w) return { reason: 'missing' };
      if (w.status !== 'pending') return { reason: 'done' };
      if (w.leased) return { reason: 'leased' };
      if (w.hit_reason !== null) {
        return {
          reason: 'suppressed',
          hit: {
            reason: w.hit_reason,
            scope: w.hit_scope,
            address: w.hit_address,
            since: w.hit_since,
            source: w.hit_source,
            detail: w.hit_detail,
          },
        };
      }
      return { reason: 'not_due', dueInMs: Math.ceil(w.due_ms) };
    });
  }

  /**
   * Records the end of an attempt as one versioned transition. Returns null when the version moved
   * on (the lease ran out and another worker took over), in which case this result is dropped.
   * `traceparent` (the attempt's span) goes with the callback it queues, so the post is traced as
   * the attempt's child.
   */
  async finish(
    d: ClaimedDelivery,
    result: AttemptResult,
    traceparent: string | null = null,
  ): Promise<Transition | null> {
    const now = new Date();
    const status =
      result.outcome === 'sent' ? 'sent' : result.outcome === 'failed' ? 'failed' : 'pending';
    const providerMessageId = result.outcome === 'sent' ? result.providerMessageId : null;
    const error = result.outcome === 'sent' ? null : result.error;
    const sentAt = result.outcome === 'sent' ? formatTimestamp(now) : null;
    let snapshot: string | null = null;
    // This process's callbacks role posts the callback itself when it can start it now.
    let poster: InProcessPoster | null = null;
    if (status !== 'pending' && d.wantsCallback) {
      if (d.callbackUrl && this.#poster?.takes(d.clientId)) poster = this.#poster;
      snapshot = callbackSnapshot({
        delivery_id: d.id,
        reference: d.reference,
        channel: d.channel,
        recipient: d.recipient,
        status,
        attempts: d.attempt,
        provider_message_id: providerMessageId,
        sent_at: sentAt,
        delivered_at: null,
        read_at: null,
        last_error: error,
      });
    }
    const finished = await this.#finishes.call({
      id: d.id,
      version: d.version,
      status,
      provider: result.provider,
      providerMessageId,
      sentAt,
      error,
      delayMs: result.outcome === 'retry' ? result.delayMs : 0,
      attemptOutcome: result.outcome === 'sent' ? 'sent' : result.kind,
      attempt: d.attempt,
      clientId: d.clientId,
      snapshot,
      traceparent: snapshot === null ? null : traceparent,
      callbackLeaseMs: poster?.leaseMs ?? null,
    });
    if (!finished) return null;
    // A terminal state is reached once: its callback is the delivery's first, keyed by the
    // delivery's id (migration 022).
    const callbackId = snapshot === null ? null : d.id;
    // The outcome stamped its row for the feed itself: only the callbacks role has work from it,
    // handed to it here when the outcome claimed the callback for it, else woken through NATS.
    if (poster && snapshot !== null && finished.callbackClaimed)
      poster.post(inProcessClaim(d, snapshot, traceparent));
    else if (this.#wake && callbackId !== null)
      wakeCallbacks(this.#wake.nc, [{ id: callbackId, clientId: d.clientId }], this.#wake.logger);
    return { status, callbackId };
  }

  /**
   * Makes this process's callbacks role (null: none, or no longer) the poster of the callbacks of
   * deliveries that end here (InProcessPoster); called by the role as it starts and stops.
   */
  postCallbacksHere(poster: InProcessPoster | null): void {
    this.#poster = poster;
  }

  async #finishBatch(reqs: FinishRequest[]): Promise<Finished[]> {
    const col = <K extends keyof FinishRequest>(k: K) => reqs.map((r) => r[k]);
    const { rows } = await queryByIds<{ id: string; version: number; callback_claimed: boolean }>(
      this.#keyed,
      {
        name: 'ens-finish-deliveries',
        text: FINISH_SQL,
        values: [
          col('id'),
          col('version'),
          col('status'),
          col('provider'),
          col('providerMessageId'),
          col('sentAt'),
          col('error'),
          col('delayMs'),
          col('attemptOutcome'),
          col('attempt'),
          col('clientId'),
          col('snapshot'),
          col('traceparent'),
          col('callbackLeaseMs'),
          this.#session?.id() ?? null,
        ],
      },
    );
    const done = new Map(rows.map((r) => [`${r.id}/${r.version}`, r.callback_claimed]));
    // A row named twice with the same version is updated once: only the first request counts it.
    return reqs.map((r): Finished => {
      const key = `${r.id}/${r.version}`;
      const claimed = done.get(key);
      if (claimed === undefined) return null;
      done.delete(key);
      return { callbackClaimed: claimed };
    });
  }

  /**
   * Ends a pending delivery that the suppression list stops, without any provider call: `failed`
   * with `last_error` naming the entry, no attempt counted, and its callback queued as for any
   * failure. Versioned like every transition: a delivery that moved on meanwhile (leased, ended,
   * no longer suppressed) is left alone. Returns null when nothing changed.
   */
  async failSuppressed(
    id: string,
    hit: SuppressionHit,
  ): Promise<{ callback: CallbackWakeup | null } | null> {
    const error = suppressionError(hit);
    return this.#woken(
      await inTransaction(this.db, async (c) => {
        const failed = await c.query<EndedRow & OpenBefore>(
          `UPDATE deliveries d SET status = 'failed', last_error = $2, lease_until = NULL, version = d.version + 1, stamp_pending = true
           FROM handoffs h, clients cl
          WHERE d.id = $1 AND d.status = 'pending' AND (d.lease_until IS NULL OR d.lease_until < now()) AND ${suppressedSql('d')}
            AND h.id = d.handoff_id AND cl.id = d.client_id
        RETURNING ${CALLBACK_RETURNING}, ${OPEN_BEFORE_RETURNING}`,
          [id, error],
        );
        const f = failed.rows[0];
        if (!f) return null;
        // A claim whose lease ran out without an outcome: its attempt ends here (see CLAIM_SQL).
        if (f.open_before)
          await c.query(
            lostAttemptsSql('SELECT $1::uuid, $2::int, $3::text, $4::timestamptz, $5::text'),
            [id, f.attempts, f.open_before.provider, f.open_before.claimed_at, LAPSED_CLAIM_ERROR],
          );
        return { callback: await queueEndedCallback(c, f, 'first') };
      }),
    );
  }

  /**
   * Applies a provider's status report (delivered, read, or a late failure) to the delivery it
   * names. Timestamps only ever move forward from null: the first report of each kind wins, a read
   * implies delivered, and reports arriving out of order cannot undo one another.
   */
  async applyStatusReport(
    r: StatusReport,
  ): Promise<{ deliveryId: string; changed: boolean; callback: CallbackWakeup | null } | null> {
    return this.#woken(
      await inTransaction(this.db, async (c) => {
        const found = await c.query<{ id: string; status: string; channel: Channel }>(
          'SELECT id, status, channel FROM deliveries WHERE provider = $1 AND ' +
            'provider_message_id = $2 FOR UPDATE',
          [r.provider, r.providerMessageId],
        );
        const row = found.rows[0];
        if (!row) return null;
        const at = formatTimestamp(r.at);
        await c.query(
          'INSERT INTO delivery_events (delivery_id, kind, occurred_at, detail) VALUES ($1, ' +
            '$2, $3, $4)',
          [row.id, r.kind, at, r.error ?? null],
        );
        if (row.status !== 'sent') return { deliveryId: row.id, changed: false, callback: null };
        // The spec fills delivered_at and read_at for whatsapp only (its row's readReceipts); other
        // channels' receipts (an SMS delivery receipt) are kept as events, and only a failure
        // changes their delivery.
        if (r.kind !== 'failed' && !CHANNEL_RULES[row.channel].readReceipts)
          return { deliveryId: row.id, changed: false, callback: null };
        if (r.kind !== 'failed') {
          const upd = await c.query(
            `UPDATE deliveries SET delivered_at = coalesce(delivered_at, $2::timestamptz),
                  read_at = CASE WHEN $3 THEN coalesce(read_at, $2::timestamptz) ELSE read_at END,
                  version = version + 1, stamp_pending = true
            WHERE id = $1 AND (delivered_at IS NULL OR ($3 AND read_at IS NULL))`,
            [row.id, at, r.kind === 'read'],
          );
          return { deliveryId: row.id, changed: (upd.rowCount ?? 0) > 0, callback: null };
        }
        const failed = await c.query<EndedRow>(
          `UPDATE deliveries d SET status = 'failed', last_error = $2, version = version + 1, stamp_pending = true
           FROM handoffs h, clients cl
          WHERE d.id = $1 AND h.id = d.handoff_id AND cl.id = d.client_id
        RETURNING ${CALLBACK_RETURNING}`,
          [row.id, r.error ?? `${r.provider}: reported failed after sending`],
        );
        const f = failed.rows[0];
        // A report has no span of its own here: the post is traced as a child of the accept.
        return {
          deliveryId: row.id,
          changed: true,
          callback: await queueEndedCallback(c, f, 'later'),
        };
      }),
    );
  }

  /**
   * Deliveries that are due but were not picked up within `graceMs` (their wake-up was lost with a
   * crash or a JetStream store). Marks them swept, so the next sweep does not re-enqueue the same
   * row again before the worker has had a chance; their due time stays as it was, because the
   * backlog's age (oldestDue) is read from it.
   */
  async takeOverdue(graceMs: number, limit: number): Promise<SendWakeup[]> {
    const { rows } = await this.db.query<SendWakeup>(
      `UPDATE deliveries SET swept_at = now()
        WHERE id IN (
          SELECT id FROM deliveries
           WHERE status = 'pending' AND next_attempt_at < now() - $1 * interval '1 millisecond'
             AND (lease_until IS NULL OR lease_until < now())
             AND (swept_at IS NULL OR swept_at < now() - $1 * interval '1 millisecond')
           ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
        RETURNING id, channel, client_id AS "clientId", tenant, event_type AS "eventType"`,
      [graceMs, limit],
    );
    if (this.#wake && rows.length > 0) wakeSenders(this.#wake.nc, rows, this.#wake.logger);
    return rows;
  }

  /**
   * After a transition's commit: wakes the feed when a delivery changed (a result with `changed`
   * false changed none), and the callbacks role for the callback it queued. Never throws; a lost
   * wake-up is made good by the feed's poll and the callbacks sweeper. Returns its argument.
   */
  #woken<T extends { changed?: boolean; callback: CallbackWakeup | null } | null>(r: T): T {
    if (!this.#wake || r === null || r.changed === false) return r;
    wakeFeed(this.#wake.nc);
    if (r.callback) wakeCallbacks(this.#wake.nc, [r.callback], this.#wake.logger);
    return r;
  }
}
