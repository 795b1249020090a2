import type { Db } from '../db/pool.ts';
import { isoSql } from '../db/pool.ts';

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

export class CallbackStore {
  /** @param leases a pool with asynchronous commit (see createAsyncCommitPool), for claims and attempt records */
  constructor(
    private readonly db: Db,
    private readonly leases: Db = db,
  ) {}

  /** Leases a due callback for one post; null when it is not due, leased elsewhere or finished. */
  async claim(id: string, leaseMs: number): Promise<ClaimedCallback | { miss: 'done' | 'leased' | 'missing' } | { miss: 'not_due'; dueInMs: number }> {
    const { rows } = await this.leases.query(
      `UPDATE callbacks SET lease_until = now() + $2 * interval '1 millisecond', attempts = attempts + 1, updated_at = now()
        WHERE id = $1 AND status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
       RETURNING id, delivery_id, client_id, url, body, attempts, attempts - attempt_base AS in_round`,
      [id, leaseMs],
    );
    const r = rows[0];
    if (r) return { id: r.id, deliveryId: r.delivery_id, clientId: r.client_id, url: r.url, body: r.body, attempt: r.attempts, attemptInRound: r.in_round };
    const why = await this.db.query<{ status: string; leased: boolean; due_ms: number }>(
      `SELECT status, coalesce(lease_until > now(), false) AS leased,
              greatest(0, extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS due_ms FROM callbacks WHERE id = $1`,
      [id],
    );
    const w = why.rows[0];
    if (!w) return { miss: 'missing' };
    if (w.status !== 'pending') return { miss: 'done' };
    if (w.leased) return { miss: 'leased' };
    return { miss: 'not_due', dueInMs: Math.ceil(w.due_ms) };
  }

  /**
   * Records one post. `retryInMs` null means no retry is left: a failure then becomes a dead
   * letter that an operator can replay.
   */
  async record(cb: ClaimedCallback, result: { ok: boolean; httpStatus?: number; error?: string }, retryInMs: number | null): Promise<'delivered' | 'pending' | 'dead'> {
    const status = result.ok ? 'delivered' : retryInMs === null ? 'dead' : 'pending';
    await this.leases.query(
      `WITH u AS (
         UPDATE callbacks SET status = $2, lease_until = NULL, last_error = $3, updated_at = now(),
                next_attempt_at = now() + coalesce($4, 0) * interval '1 millisecond'
          WHERE id = $1 AND attempts = $5 RETURNING id)
       INSERT INTO callback_attempts (callback_id, number, http_status, error)
       SELECT $1, $5, $6, $3 FROM u`,
      [cb.id, status, result.ok ? null : (result.error ?? 'failed'), retryInMs, cb.attempt, result.httpStatus ?? null],
    );
    return status;
  }

  async listDead(opts: { clientId?: string; limit: number }): Promise<DeadLetter[]> {
    const { rows } = await this.db.query<DeadLetter>(
      `SELECT id, delivery_id, client_id, url, attempts, last_error, ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at
         FROM callbacks WHERE status = 'dead' AND ($1::text IS NULL OR client_id = $1) ORDER BY updated_at LIMIT $2`,
      [opts.clientId ?? null, opts.limit],
    );
    return rows;
  }

  /** Puts dead letters back in the queue (by id, or all of a client's); returns the ids to wake. */
  async replay(sel: { ids?: string[]; clientId?: string }): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>(
      `UPDATE callbacks SET status = 'pending', next_attempt_at = now(), lease_until = NULL, attempt_base = attempts, updated_at = now()
        WHERE status = 'dead' AND ($1::uuid[] IS NULL OR id = ANY($1)) AND ($2::text IS NULL OR client_id = $2)
       RETURNING id`,
      [sel.ids ?? null, sel.clientId ?? null],
    );
    return rows.map((r) => r.id);
  }

  /** Pending callbacks whose wake-up was lost; pushes their due time by the grace (see DeliveryStore.takeOverdue). */
  async takeOverdue(graceMs: number, limit: number): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>(
      `UPDATE callbacks SET next_attempt_at = now()
        WHERE id IN (SELECT id FROM callbacks
                      WHERE status = 'pending' AND next_attempt_at < now() - $1 * interval '1 millisecond'
                        AND (lease_until IS NULL OR lease_until < now())
                      ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING id`,
      [graceMs, limit],
    );
    return rows.map((r) => r.id);
  }
}
