import type { Db } from '@ens/core/internal';

/** Deliveries due and waiting for a send, per client, tenant and channel, with the operator's weights. */
export interface WaitingFlow {
  client_id: string;
  client_name: string;
  tenant: string;
  channel: string;
  waiting: number;
  oldest_seconds: number;
  client_weight: number;
  tenant_weight: number;
  priority_event_types: string[];
  /** ENS's own alert traffic (the internal alert client and tenant), labelled apart from customers'. */
  internal?: boolean;
}

/** A paced provider, as its last reservation left it. */
export interface ProviderPaceRow {
  provider: string;
  per_second: number;
  /** How far ahead sends are already booked: a provider held at its pace has a queue of them. */
  booked_ahead_ms: number;
  /** Sends the provider accepted per second over the dashboard's provider window. */
  sent_per_second: number;
  rate_limited: number;
}

/** Rows of the waiting table: the largest backlogs. */
const TOP = 20;

const WAITING_SQL = `
SELECT w.client_id, c.name AS client_name, w.tenant, w.channel, w.waiting, w.oldest_seconds,
       c.send_weight AS client_weight, coalesce(t.send_weight, 1) AS tenant_weight, c.priority_event_types
  FROM (SELECT client_id, tenant, channel, count(*)::int AS waiting,
               greatest(0, extract(epoch FROM now() - min(next_attempt_at)))::float8 AS oldest_seconds
          FROM deliveries WHERE status = 'pending' AND next_attempt_at <= now()
         GROUP BY client_id, tenant, channel ORDER BY count(*) DESC LIMIT ${TOP}) w
  JOIN clients c ON c.id = w.client_id
  LEFT JOIN tenants t ON t.client_id = w.client_id AND t.id = w.tenant
 ORDER BY w.waiting DESC, w.client_id, w.tenant, w.channel`;

const PACE_SQL = `
SELECT p.name AS provider, p.per_second, greatest(0, extract(epoch FROM p.next_at - now()) * 1000)::float8 AS booked_ahead_ms,
       coalesce(a.sent, 0)::float8 / ($1 * 60) AS sent_per_second, coalesce(a.rate_limited, 0)::int AS rate_limited
  FROM provider_pace p
  LEFT JOIN (SELECT provider, count(*) FILTER (WHERE outcome = 'sent') AS sent, count(*) FILTER (WHERE outcome = 'rate_limited') AS rate_limited
               FROM attempts WHERE started_at >= now() - $1 * interval '1 minute' GROUP BY provider) a ON a.provider = p.name
 ORDER BY p.name`;

export async function loadWaitingFlows(db: Db): Promise<WaitingFlow[]> {
  return (await db.query<WaitingFlow>(WAITING_SQL)).rows;
}

export async function loadProviderPaces(db: Db, windowMinutes: number): Promise<ProviderPaceRow[]> {
  return (await db.query<ProviderPaceRow>(PACE_SQL, [windowMinutes])).rows;
}
