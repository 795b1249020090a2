import type { Db } from '../db/pool.ts';
import { Errors } from '../errors.ts';
import { acceptBatcherFor, secondsToUtcMidnight } from './accept-batcher.ts';
import type { AcceptInput, AcceptOutcome } from './accept-input.ts';
import type { Channel } from '../schemas/channel.ts';

export type { AcceptInput, AcceptOutcome } from './accept-input.ts';

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

/**
 * The refusals of acceptHandoff, decided before anything is written: a request that carries files
 * (inline images) calls this before storing them, so that a request refused for its tenant, its
 * key or its quota leaves no file behind. Resolves with the stored 202 body of a replay (nothing
 * needs storing then), or null when the request may go on. acceptHandoff decides again under its
 * locks; what changes in between (a racing request, a tenant deleted) can still refuse the request
 * after its files are written, and the media collector removes those after ENS_MEDIA_GRACE.
 */
export async function refuseBeforeStoring(
  db: Db,
  a: Pick<
    AcceptInput,
    'clientId' | 'idempotencyKey' | 'requestHash' | 'tenant' | 'deliveries' | 'quota'
  >,
): Promise<string | null> {
  const counts = new Map<Channel, number>();
  for (const d of a.deliveries) counts.set(d.channel, (counts.get(d.channel) ?? 0) + 1);
  const quoted = [...counts]
    .map(([channel, count]) => ({ channel, count, quota: a.quota(channel) }))
    .filter((q) => q.quota > 0);
  // A replay's 202 must be as durable as the first one (issue 26): the key read may be a commit
  // on this server only, whose wait for a synchronous standby was cut off. A read commits without
  // waiting for any standby; a write when a key is found (and only then: a first accept pays
  // nothing) makes this statement's commit wait until the standby has everything before it, the
  // key included, as a first accept's commit waits. The write is the smallest there is (see
  // ens_accept_batch.sql).
  const { rows } = await db.query<{
    hash: string | null;
    response: string | null;
    tenant: boolean;
    used: Record<string, number>;
  }>(
    `SELECT k.request_hash AS hash, k.response,
            CASE WHEN k.request_hash IS NOT NULL
              THEN pg_logical_emit_message(true, 'ens.replay', '') END AS replicated,
            EXISTS (SELECT FROM tenants WHERE client_id = $1 AND id = $3) AS tenant,
            (SELECT coalesce(jsonb_object_agg(channel, count), '{}') FROM usage_daily
              WHERE client_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date AND channel = ANY ($4::text[])) AS used
       FROM (SELECT 1) one LEFT JOIN idempotency_keys k ON k.client_id = $1 AND k.key = $2`,
    [a.clientId, a.idempotencyKey, a.tenant, quoted.map((q) => q.channel)],
  );
  const row = rows[0]!;
  if (row.hash !== null) {
    if (row.hash !== a.requestHash) throw Errors.idempotencyKeyReused();
    return row.response;
  }
  if (!row.tenant) throw Errors.tenantNotProvisioned(a.tenant);
  for (const q of quoted) {
    if ((row.used[q.channel] ?? 0) + q.count > q.quota)
      throw Errors.quotaExceeded(q.channel, q.quota, secondsToUtcMidnight());
  }
  return null;
}

/** Deletes idempotency keys older than the retention; returns how many. */
export async function purgeIdempotencyKeys(db: Db, olderThanMs: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM idempotency_keys WHERE created_at < now() - ($1::bigint * interval '1 millisecond')`,
    [olderThanMs],
  );
  return r.rowCount ?? 0;
}
