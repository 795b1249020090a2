import type { Db } from '../db/pool.ts';
import { inTransaction, isoSql } from '../db/pool.ts';
import { newId } from '../ids.ts';
import { serialiseCallback } from '../schemas/callback-payload.ts';
import type { Channel } from '../schemas/channel.ts';
import type { CallbackPayload } from '../schemas/delivery.ts';
import { formatTimestamp } from '../timestamps.ts';

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
  callbackUrl: string | null;
}

export type ClaimMiss = { reason: 'done' } | { reason: 'not_due'; dueInMs: number } | { reason: 'leased' } | { reason: 'missing' };

export type AttemptResult =
  | { outcome: 'sent'; provider: string; providerMessageId: string }
  | { outcome: 'retry'; provider: string; error: string; delayMs: number; kind: 'transient' | 'rate_limited' }
  | { outcome: 'failed'; provider: string; error: string; kind: 'permanent' | 'transient' | 'rate_limited' };

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

const CLAIM_SQL = `
WITH c AS (
  -- No indexed column changes here, so the claim is a HOT update; the attempt's outcome restamps
  -- the row for the feed.
  UPDATE deliveries SET lease_until = now() + $2 * interval '1 millisecond', attempts = attempts + 1,
         version = version + 1
   WHERE id = $1 AND status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
  RETURNING id, version, attempts, client_id, handoff_id, tenant, event_type, reference, channel, recipient
), started AS (
  INSERT INTO attempts (delivery_id, number, provider) SELECT id, attempts, $3 FROM c
), lost AS (
  UPDATE attempts SET outcome = 'lost', finished_at = now(), error = 'worker stopped during the attempt'
   WHERE delivery_id = $1 AND outcome IS NULL AND EXISTS (SELECT 1 FROM c)
)
SELECT c.*, h.messages -> c.channel AS content, h.callback_url, coalesce(t.settings, '{}'::jsonb) AS tenant_settings,
       (h.callback_url IS NOT NULL AND cl.callback_secret_enc IS NOT NULL) AS wants_callback
  FROM c JOIN handoffs h ON h.id = c.handoff_id
  JOIN clients cl ON cl.id = c.client_id
  LEFT JOIN tenants t ON t.client_id = c.client_id AND t.id = c.tenant`;

const FINISH_SQL = `
WITH d AS (
  UPDATE deliveries SET status = $3, provider = $4, provider_message_id = coalesce($5, provider_message_id),
         sent_at = coalesce($6::timestamptz, sent_at), last_error = $7,
         next_attempt_at = CASE WHEN $3 = 'pending' THEN now() + $8 * interval '1 millisecond' ELSE next_attempt_at END,
         lease_until = NULL, version = version + 1, stamp_pending = true
   WHERE id = $1 AND version = $2
  RETURNING id
), a AS (
  UPDATE attempts SET outcome = $9, finished_at = now(), provider_message_id = $5, error = $7
   WHERE delivery_id = $1 AND number = $10 AND EXISTS (SELECT 1 FROM d)
), cb AS (
  INSERT INTO callbacks (id, delivery_id, client_id, url, body)
  SELECT $11, d.id, $12, $13, $14 FROM d WHERE $14::text IS NOT NULL
  RETURNING id
)
SELECT (SELECT count(*) FROM d)::int AS updated, (SELECT id FROM cb) AS callback_id`;

export class DeliveryStore {
  /** @param leases a pool with asynchronous commit (see createAsyncCommitPool), used for claims only */
  constructor(
    private readonly db: Db,
    private readonly leases: Db = db,
  ) {}

  /**
   * Takes a delivery for one attempt: bumps its attempt count and leases it for leaseMs. A
   * crashed worker's lease simply runs out, and its unfinished attempt is then marked `lost`.
   */
  async claim(id: string, provider: string, leaseMs: number): Promise<ClaimedDelivery | ClaimMiss> {
    const { rows } = await this.leases.query(CLAIM_SQL, [id, leaseMs, provider]);
    const r = rows[0];
    if (r) {
      return {
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
      };
    }
    const why = await this.db.query<{ status: string; due_ms: number; leased: boolean }>(
      `SELECT status, greatest(0, extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS due_ms,
              coalesce(lease_until > now(), false) AS leased FROM deliveries WHERE id = $1`,
      [id],
    );
    const w = why.rows[0];
    if (!w) return { reason: 'missing' };
    if (w.status !== 'pending') return { reason: 'done' };
    if (w.leased) return { reason: 'leased' };
    return { reason: 'not_due', dueInMs: Math.ceil(w.due_ms) };
  }

  /**
   * Records the end of an attempt as one versioned transition. Returns null when the version moved
   * on (the lease ran out and another worker took over), in which case this result is dropped.
   */
  async finish(d: ClaimedDelivery, result: AttemptResult): Promise<Transition | null> {
    const now = new Date();
    const status = result.outcome === 'sent' ? 'sent' : result.outcome === 'failed' ? 'failed' : 'pending';
    const providerMessageId = result.outcome === 'sent' ? result.providerMessageId : null;
    const error = result.outcome === 'sent' ? null : result.error;
    const sentAt = result.outcome === 'sent' ? formatTimestamp(now) : null;
    let body: string | null = null;
    if (status !== 'pending' && d.wantsCallback) {
      body = serialiseCallback({
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
    const callbackId = body === null ? null : newId();
    const attemptOutcome = result.outcome === 'sent' ? 'sent' : result.kind;
    const { rows } = await this.db.query<{ updated: number; callback_id: string | null }>(FINISH_SQL, [
      d.id, d.version, status, result.provider, providerMessageId, sentAt, error,
      result.outcome === 'retry' ? result.delayMs : 0, attemptOutcome, d.attempt,
      callbackId, d.clientId, d.callbackUrl, body,
    ]);
    if (!rows[0] || rows[0].updated === 0) return null;
    return { status, callbackId: rows[0].callback_id };
  }

  /**
   * Applies a provider's status report (delivered, read, or a late failure) to the delivery it
   * names. Timestamps only ever move forward from null: the first report of each kind wins, a read
   * implies delivered, and reports arriving out of order cannot undo one another.
   */
  async applyStatusReport(r: StatusReport): Promise<{ deliveryId: string; changed: boolean; callbackId: string | null } | null> {
    return inTransaction(this.db, async (c) => {
      const found = await c.query<{ id: string; status: string }>(
        'SELECT id, status FROM deliveries WHERE provider = $1 AND provider_message_id = $2 FOR UPDATE',
        [r.provider, r.providerMessageId],
      );
      const row = found.rows[0];
      if (!row) return null;
      const at = formatTimestamp(r.at);
      await c.query('INSERT INTO delivery_events (delivery_id, kind, occurred_at, detail) VALUES ($1, $2, $3, $4)', [row.id, r.kind, at, r.error ?? null]);
      if (row.status !== 'sent') return { deliveryId: row.id, changed: false, callbackId: null };
      if (r.kind !== 'failed') {
        const upd = await c.query(
          `UPDATE deliveries SET delivered_at = coalesce(delivered_at, $2::timestamptz),
                  read_at = CASE WHEN $3 THEN coalesce(read_at, $2::timestamptz) ELSE read_at END,
                  version = version + 1, stamp_pending = true
            WHERE id = $1 AND (delivered_at IS NULL OR ($3 AND read_at IS NULL))`,
          [row.id, at, r.kind === 'read'],
        );
        return { deliveryId: row.id, changed: (upd.rowCount ?? 0) > 0, callbackId: null };
      }
      const failed = await c.query(
        `UPDATE deliveries d SET status = 'failed', last_error = $2, version = version + 1, stamp_pending = true
           FROM handoffs h, clients cl
          WHERE d.id = $1 AND h.id = d.handoff_id AND cl.id = d.client_id
        RETURNING d.id, d.reference, d.channel, d.recipient, d.attempts, d.provider_message_id, d.client_id,
                  ${isoSql('d.sent_at')} AS sent_at, ${isoSql('d.delivered_at')} AS delivered_at, ${isoSql('d.read_at')} AS read_at,
                  h.callback_url, (h.callback_url IS NOT NULL AND cl.callback_secret_enc IS NOT NULL) AS wants_callback`,
        [row.id, r.error ?? `${r.provider}: reported failed after sending`],
      );
      const f = failed.rows[0];
      if (!f?.wants_callback) return { deliveryId: row.id, changed: true, callbackId: null };
      const payload: CallbackPayload = {
        delivery_id: f.id,
        reference: f.reference,
        channel: f.channel,
        recipient: f.recipient,
        status: 'failed',
        attempts: f.attempts,
        provider_message_id: f.provider_message_id,
        sent_at: f.sent_at,
        delivered_at: f.delivered_at,
        read_at: f.read_at,
        last_error: r.error ?? `${r.provider}: reported failed after sending`,
      };
      const callbackId = newId();
      await c.query('INSERT INTO callbacks (id, delivery_id, client_id, url, body) VALUES ($1, $2, $3, $4, $5)', [
        callbackId, f.id, f.client_id, f.callback_url, serialiseCallback(payload),
      ]);
      return { deliveryId: row.id, changed: true, callbackId };
    });
  }

  /**
   * Deliveries that are due but were not picked up within `graceMs` (their wake-up was lost with a
   * crash or a JetStream store). Pushes their due time forward by the grace so one sweep does not
   * re-enqueue the same row again before the worker has had a chance.
   */
  async takeOverdue(graceMs: number, limit: number): Promise<{ id: string; channel: Channel }[]> {
    const { rows } = await this.db.query<{ id: string; channel: Channel }>(
      `UPDATE deliveries SET next_attempt_at = now()
        WHERE id IN (
          SELECT id FROM deliveries
           WHERE status = 'pending' AND next_attempt_at < now() - $1 * interval '1 millisecond'
             AND (lease_until IS NULL OR lease_until < now())
           ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
        RETURNING id, channel`,
      [graceMs, limit],
    );
    return rows;
  }
}
