import type { Channel, Suppression, SuppressionReasonT } from '@ens/core';
import { inTransaction, isoSql, type Db } from '@ens/core/internal';

/** How many matches a search by address across a client's tenants shows. */
export const ACROSS_TENANTS_SHOWN = 200;

/**
 * A tenant's list is counted exactly up to this many entries; beyond it the page says "more than".
 */
export const COUNT_BOUND = 10_000;

/** How long one of the page's reads may run before it is cancelled. */
const STATEMENT_TIMEOUT_MS = 5000;

const COLUMNS = `s.tenant, s.channel, s.address, s.scope, s.reason, s.source, s.provider, s.delivery_id::text AS delivery_id, s.detail, s.created_by,
  ${isoSql('s.created_at')} AS created_at, ${isoSql('s.updated_at')} AS updated_at, ${isoSql('s.expires_at')} AS expires_at`;

/**
 * An address's entries in every tenant of a client, for each (channel, normalised address) pair
 * given. The primary key starts (client_id, tenant, …) and PostgreSQL 15 cannot skip over its
 * tenants, so a plain `WHERE client_id = $1 AND address = $2` reads every entry of the client:
 * the lateral subquery (kept a per-row subplan by OFFSET 0) probes the key once per tenant and
 * pair instead, which costs the number of tenants, not the number of entries.
 */
export const ACROSS_TENANTS_SQL = `
SELECT ${COLUMNS}
  FROM tenants t
 CROSS JOIN unnest($2::text[], $3::text[]) AS p(channel, address)
 CROSS JOIN LATERAL (
   SELECT * FROM suppressions s
    WHERE s.client_id = t.client_id AND s.tenant = t.id AND s.channel = p.channel AND s.address = p.address
      AND ($4::text IS NULL OR s.reason = $4)
   OFFSET 0) s
 WHERE t.client_id = $1
 ORDER BY s.tenant, s.channel, s.address, s.scope
 LIMIT $5`;

/**
 * The entries of an address in every tenant of the client; `more` when there were more than
 * ACROSS_TENANTS_SHOWN.
 */
export async function findAcrossTenants(
  db: Db,
  clientId: string,
  keys: readonly { channel: Channel; address: string }[],
  reason: SuppressionReasonT | null,
): Promise<{ rows: Suppression[]; more: boolean }> {
  if (keys.length === 0) return { rows: [], more: false };
  const rows = await inTransaction(db, async (c) => {
    await c.query(`SET LOCAL statement_timeout = ${STATEMENT_TIMEOUT_MS}`);
    return (
      await c.query<Suppression>(ACROSS_TENANTS_SQL, [
        clientId,
        keys.map((k) => k.channel),
        keys.map((k) => k.address),
        reason,
        ACROSS_TENANTS_SHOWN + 1,
      ])
    ).rows;
  });
  return { rows: rows.slice(0, ACROSS_TENANTS_SHOWN), more: rows.length > ACROSS_TENANTS_SHOWN };
}

/**
 * How many entries of one tenant match the filters, read from the primary key and stopped at
 * COUNT_BOUND + 1: a list of millions is not counted on every page view.
 */
export async function countTenant(
  db: Db,
  clientId: string,
  tenant: string,
  f: { channel: Channel | null; reason: SuppressionReasonT | null },
): Promise<{ n: number; atLeast: boolean }> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (
       SELECT 1 FROM suppressions WHERE client_id = $1 AND tenant = $2 AND ($3::text IS NULL OR channel = $3) AND ($4::text IS NULL OR reason = $4) LIMIT $5) x`,
    [clientId, tenant, f.channel, f.reason, COUNT_BOUND + 1],
  );
  const n = rows[0]!.n;
  return n > COUNT_BOUND ? { n: COUNT_BOUND, atLeast: true } : { n, atLeast: false };
}

/** How many clients the page offers in a list; past this it asks for the client id. */
export const CLIENT_CHOICES = 500;

/** Clients by name for the page's client list, or null when there are more than CLIENT_CHOICES. */
export async function clientChoices(db: Db): Promise<{ id: string; name: string }[] | null> {
  const { rows } = await db.query<{ id: string; name: string }>(
    'SELECT id, name FROM clients ORDER BY name, id LIMIT $1',
    [CLIENT_CHOICES + 1],
  );
  return rows.length > CLIENT_CHOICES ? null : rows;
}
