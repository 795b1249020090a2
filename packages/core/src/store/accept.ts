import type { Db } from '../db/pool.ts';
import { acceptBatcherFor } from './accept-batcher.ts';
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

/**
 * Stores a handoff and all its deliveries atomically, keyed by (client, Idempotency-Key). Accepts
 * arriving together share one statement and one transaction (see accept-batcher.ts); each keeps
 * its own outcome. A concurrent duplicate blocks on the key's index entry until the first commits
 * and then gets the replay, so two sends can never both be created. Throws the HttpError of a
 * refused item: tenant not provisioned (400), quota exceeded (429), key reused with another body
 * (422).
 */
export function acceptHandoff(db: Db, a: AcceptInput): Promise<AcceptOutcome> {
  return acceptBatcherFor(db).accept(a);
}

/** Deletes idempotency keys older than the retention; returns how many. */
export async function purgeIdempotencyKeys(db: Db, olderThanMs: number): Promise<number> {
  const r = await db.query(`DELETE FROM idempotency_keys WHERE created_at < now() - ($1::bigint * interval '1 millisecond')`, [olderThanMs]);
  return r.rowCount ?? 0;
}
