import type { Db } from '../../db/pool.ts';
import { attemptInFlightSql } from '../attempt-rows.ts';

/*
 * The console dashboard's read models of the delivery tables: the last day's deliveries counted
 * every way the dashboard shows them, the providers' recent attempts, the callbacks queue, and
 * what waits for a send per flow. Each is one statement; the dashboard shapes the rows.
 */

/*
 * One pass over the last day's deliveries gives all the delivery numbers: GROUPING SETS counts by
 * channel and status (with the last hour as a FILTER), by event type, by tenant, and by channel
 * and status per minute (last hour) and per hour (last day), each split by whether the row is
 * ENS's own alert traffic. The id range (ids are UUIDv7, see ens_uuid7_floor) makes it a range
 * scan of the primary key, bounded to one day whatever the table's size.
 *
 * gset tells the sets apart: grouping(event_type, client_id, minute, hour, channel), one bit each
 * (1 = not grouped by it), so (channel, status) = 30, (event_type) = 15, (client_id, tenant) = 23,
 * (channel, status, minute) = 26, (channel, status, hour) = 28.
 */
export const DELIVERY_COUNTS_SQL = `
SELECT grouping(event_type, client_id, minute, hour, channel) AS gset, internal,
       channel, status, event_type, client_id, tenant, minute, hour,
       count(*)::int AS day, count(*) FILTER (WHERE created_at >= now() - interval '1 hour')::int AS hour_n,
       count(*) FILTER (WHERE status = 'sent')::int AS sent, count(*) FILTER (WHERE status = 'failed')::int AS failed,
       count(*) FILTER (WHERE status = 'sent' AND created_at >= now() - interval '1 hour')::int AS hour_sent,
       count(*) FILTER (WHERE status = 'failed' AND created_at >= now() - interval '1 hour')::int AS hour_failed
  FROM (SELECT channel, status, event_type, client_id, tenant, created_at,
               (client_id = ANY($1::text[]) AND tenant = $2) AS internal,
               CASE WHEN created_at >= date_trunc('minute', now()) - interval '59 minutes'
                    THEN (extract(epoch FROM date_trunc('minute', created_at)) * 1000)::bigint END AS minute,
               CASE WHEN created_at >= date_trunc('hour', now()) - interval '23 hours'
                    THEN (extract(epoch FROM date_trunc('hour', created_at)) * 1000)::bigint END AS hour
          FROM deliveries
         WHERE id >= ens_uuid7_floor(now() - interval '1 day') AND created_at >= now() - interval '1 day') d
 GROUP BY GROUPING SETS ((internal, channel, status), (internal, event_type), (internal, client_id, tenant),
                         (internal, channel, status, minute), (internal, channel, status, hour))`;

/** One row of DELIVERY_COUNTS_SQL: one group of one grouping set (`gset` says which). */
export interface DeliveryCountRow {
  gset: number;
  internal: boolean;
  channel: string;
  status: 'pending' | 'sent' | 'failed';
  event_type: string;
  client_id: string;
  tenant: string;
  /** Bucket starts in epoch ms (bigint, as text), or null outside its set. */
  minute: string | null;
  hour: string | null;
  day: number;
  hour_n: number;
  sent: number;
  failed: number;
  /** Of the last hour alone: the failure-rate trend (last hour against the 23 before). */
  hour_sent: number;
  hour_failed: number;
}

/** The last day's deliveries by grouping set; `internal` names ENS's own alert traffic. */
export async function countRecentDeliveries(
  db: Pick<Db, 'query'>,
  internal: { clientIds: string[]; tenant: string },
): Promise<DeliveryCountRow[]> {
  return (
    await db.query<DeliveryCountRow>(DELIVERY_COUNTS_SQL, [internal.clientIds, internal.tenant])
  ).rows;
}

/*
 * An attempt's row is written when it ends (migration 017): the attempts in flight are the
 * deliveries their claims left open (pending, a lease set), read from the pending rows.
 */
const PROVIDERS_SQL = `
WITH ended AS (
  SELECT provider,
         count(*) FILTER (WHERE outcome = 'sent')::int AS sent,
         count(*) FILTER (WHERE outcome = 'transient')::int AS transient,
         count(*) FILTER (WHERE outcome = 'rate_limited')::int AS rate_limited,
         count(*) FILTER (WHERE outcome = 'permanent')::int AS permanent,
         count(*) FILTER (WHERE outcome = 'lost')::int AS lost,
         -- open rows a version before 017 left
         count(*) FILTER (WHERE outcome IS NULL)::int AS in_flight
    FROM attempts WHERE started_at >= now() - $1 * interval '1 minute'
   GROUP BY provider
), open AS (
  SELECT d.provider, count(*)::int AS in_flight
    FROM deliveries d
   WHERE ${attemptInFlightSql('d')} AND d.claimed_at >= now() - $1 * interval '1 minute'
   GROUP BY d.provider
)
SELECT provider, coalesce(e.sent, 0) AS sent, coalesce(e.transient, 0) AS transient,
       coalesce(e.rate_limited, 0) AS rate_limited, coalesce(e.permanent, 0) AS permanent,
       coalesce(e.lost, 0) AS lost, coalesce(e.in_flight, 0) + coalesce(o.in_flight, 0) AS in_flight
  FROM ended e FULL JOIN open o USING (provider)
 ORDER BY provider`;

/** A provider's attempts started in the window, by outcome (`in_flight`: no outcome yet). */
export interface ProviderOutcomes {
  provider: string;
  sent: number;
  transient: number;
  rate_limited: number;
  permanent: number;
  lost: number;
  in_flight: number;
}

/** Attempts started in the last `windowMinutes`, per provider, by outcome. */
export async function providerOutcomes(
  db: Pick<Db, 'query'>,
  windowMinutes: number,
): Promise<ProviderOutcomes[]> {
  return (await db.query<ProviderOutcomes>(PROVIDERS_SQL, [windowMinutes])).rows;
}

/**
 * Callbacks waiting for a post (`backlog`) and dead letters, all clients: two counts, each read
 * from its partial index (callbacks_due, callbacks_dead), never the whole table.
 */
export async function callbackQueueCounts(
  db: Pick<Db, 'query'>,
): Promise<{ backlog: number; dead_letters: number }> {
  const [backlog, dead] = await Promise.all([
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM callbacks WHERE status = 'pending'`),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM callbacks WHERE status = 'dead'`),
  ]);
  return { backlog: backlog.rows[0]!.n, dead_letters: dead.rows[0]!.n };
}

/**
 * Deliveries due and waiting for a send, per client, tenant and channel, with the operator's
 * weights.
 */
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
  /**
   * ENS's own alert traffic (the internal alert client and tenant), labelled apart from customers'.
   */
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
