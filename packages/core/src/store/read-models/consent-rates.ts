import type { Db } from '../../db/pool.ts';

/*
 * The console's email bounce and complaint rates per tenant: a read model of deliveries and the
 * suppression list's provider refusals.
 */

/*
 * Per tenant, over the email deliveries created in the last RATE_DAYS days: the id range
 * (ens_uuid7_floor; ids are UUIDv7) reads that end of the primary key only, however large the
 * table. Rates are per cohort (what was sent in the window, and what of it bounced or was
 * complained about since), so a report about an older send does not inflate this week's rate.
 *
 * Refusals at send time leave no mark on the delivery (it fails, as any permanent error), but the
 * worker records the refused address with source 'provider' and the delivery's id: those entries
 * made in the window are joined to their delivery by primary key. A delivery whose bounce was
 * also reported later (bounced_at set) counts once.
 */
export const RATES_SQL = `
WITH d AS (
  SELECT client_id, tenant,
         count(*) FILTER (WHERE status = 'sent')::int AS sent,
         count(*) FILTER (WHERE bounced_at IS NOT NULL)::int AS bounced,
         count(*) FILTER (WHERE complained_at IS NOT NULL)::int AS complained
    FROM deliveries
   WHERE id >= ens_uuid7_floor(now() - $1::int * interval '1 day') AND created_at >= now() - $1::int * interval '1 day' AND channel = 'email'
   GROUP BY client_id, tenant),
r AS (
  SELECT s.client_id, s.tenant, count(*)::int AS refused
    FROM suppressions s JOIN deliveries x ON x.id = s.delivery_id
   WHERE s.created_at >= now() - $1::int * interval '1 day' AND s.source = 'provider' AND s.reason IN ('hard_bounce', 'invalid_recipient') AND s.channel = 'email'
     AND x.id >= ens_uuid7_floor(now() - $1::int * interval '1 day') AND x.created_at >= now() - $1::int * interval '1 day'
     AND x.status = 'failed' AND x.bounced_at IS NULL
   GROUP BY s.client_id, s.tenant),
j AS (
  SELECT client_id, tenant, coalesce(d.sent, 0) AS sent, coalesce(d.bounced, 0) AS bounced, coalesce(d.complained, 0) AS complained,
         coalesce(r.refused, 0) AS refused
    FROM d FULL JOIN r USING (client_id, tenant))
SELECT client_id, tenant, sent, bounced, refused, complained,
       count(*) OVER ()::int AS tenants,
       (count(*) FILTER (WHERE complained * 100 > sent * $2::numeric) OVER ())::int AS over_limit
  FROM j
 ORDER BY complained::float8 / nullif(sent, 0) DESC NULLS LAST, (bounced + refused)::float8 / nullif(sent + refused, 0) DESC NULLS LAST,
          sent DESC, client_id, tenant
 LIMIT $3`;

/** One tenant's counts (RATES_SQL), with the totals over every tenant repeated on each row. */
export interface TenantRateCounts {
  client_id: string;
  tenant: string;
  sent: number;
  bounced: number;
  refused: number;
  complained: number;
  tenants: number;
  over_limit: number;
}

/**
 * Tenants' email counts over the last `days` days, those nearest `limitPercent` of complaints
 * first, at most `shown` of them.
 */
export async function readTenantRates(
  db: Pick<Db, 'query'>,
  opts: { days: number; limitPercent: number; shown: number },
): Promise<TenantRateCounts[]> {
  return (await db.query<TenantRateCounts>(RATES_SQL, [opts.days, opts.limitPercent, opts.shown]))
    .rows;
}
