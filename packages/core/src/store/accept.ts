import type pg from 'pg';
import type { Db } from '../db/pool.ts';
import { Errors } from '../errors.ts';
import type { Channel } from '../schemas/channel.ts';

export interface AcceptInput {
  clientId: string;
  idempotencyKey: string;
  requestHash: string;
  /** The exact 202 body; stored so a replay answers byte for byte. */
  responseBody: string;
  handoffId: string;
  tenant: string;
  eventType: string;
  reference: string | null;
  callbackUrl: string | null;
  /** Messages as stored: inline image bytes already replaced by storage keys. */
  messages: unknown;
  deliveries: { id: string; channel: Channel; recipient: string }[];
  /** Daily quota per channel for this client (0 = unlimited). */
  quota: (channel: Channel) => number;
}

export type AcceptOutcome =
  | { outcome: 'created'; responseBody: string }
  | { outcome: 'replay'; responseBody: string };

function secondsToUtcMidnight(): number {
  const now = new Date();
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return (next - now.getTime()) / 1000;
}

/**
 * Stores a handoff and all its deliveries atomically, keyed by (client, Idempotency-Key), in one
 * round trip (the `ens_accept` function). A concurrent duplicate blocks on the key's index entry
 * until the first commits and then gets the replay, so two sends can never both be created.
 */
export async function acceptHandoff(db: Db, a: AcceptInput): Promise<AcceptOutcome> {
  const counts = new Map<Channel, number>();
  for (const d of a.deliveries) counts.set(d.channel, (counts.get(d.channel) ?? 0) + 1);
  const quotaChannels = [...counts.keys()];
  let res: pg.QueryResult<{ outcome: 'created' | 'replay'; response: string; request_hash: string }>;
  try {
    res = await db.query(
      `SELECT * FROM ens_accept($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::uuid[], $12::text[], $13::text[], $14::text[], $15::int[], $16::int[])`,
      [
        a.clientId, a.idempotencyKey, a.requestHash, a.responseBody,
        a.handoffId, a.tenant, a.eventType, a.reference, a.callbackUrl, JSON.stringify(a.messages),
        a.deliveries.map((d) => d.id), a.deliveries.map((d) => d.channel), a.deliveries.map((d) => d.recipient),
        quotaChannels, quotaChannels.map((c) => counts.get(c)!), quotaChannels.map((c) => a.quota(c)),
      ],
    );
  } catch (e) {
    const err = e as { code?: string; message?: string; detail?: string };
    if (err.code === 'EN001') throw Errors.tenantNotProvisioned(a.tenant);
    if (err.code === 'EN002') throw Errors.quotaExceeded(err.message ?? 'channel', Number(err.detail), secondsToUtcMidnight());
    throw e;
  }
  const row = res.rows[0];
  if (!row) throw new Error('ens_accept returned no row');
  if (row.outcome === 'replay' && row.request_hash !== a.requestHash) throw Errors.idempotencyKeyReused();
  return { outcome: row.outcome, responseBody: row.response };
}

/** Deletes idempotency keys older than the retention; returns how many. */
export async function purgeIdempotencyKeys(db: Db, olderThanMs: number): Promise<number> {
  const r = await db.query(`DELETE FROM idempotency_keys WHERE created_at < now() - ($1::bigint * interval '1 millisecond')`, [olderThanMs]);
  return r.rowCount ?? 0;
}
