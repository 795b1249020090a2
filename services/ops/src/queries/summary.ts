import { CHANNELS } from '@ens/core';
import { providerUp, type Db } from '@ens/core/internal';
import { loadBacklog, type Backlog } from './backlog.ts';
import { loadProviderPaces, loadWaitingFlows, type ProviderPaceRow, type WaitingFlow } from './fair-delivery.ts';
import { clientNames } from './clients.ts';
import { isInternal, loadInternalTraffic, type InternalTraffic } from './internal-client.ts';
import { loadConsentSummary, type ConsentSummary } from './consent-summary.ts';

export const STATUSES = ['pending', 'sent', 'failed'] as const;
export type StatusCounts = Record<(typeof STATUSES)[number], number>;
export type ByChannel = Record<string, StatusCounts>;

export interface FailureRow {
  total: number;
  failed: number;
  /** failed / (sent + failed), in percent; null when nothing has ended yet. */
  rate_percent: number | null;
}

export interface ProviderHealth {
  provider: string;
  sent: number;
  transient: number;
  rate_limited: number;
  permanent: number;
  lost: number;
  in_flight: number;
  /** The in-process ens_provider_up gauge (1 up, 0 taken out); null when no worker runs in this process. */
  up: boolean | null;
}

export interface FiringAlert {
  firing_id: string;
  rule_id: string;
  name: string;
  scope: string;
  value: string;
  started_at: string;
  total: number;
  failed: number;
  rate_percent: number;
  threshold_percent: number;
}

/** Counts per bucket (a minute or an hour, by creation time), oldest first. */
export interface Series {
  /** Bucket starts, ISO, UTC. */
  buckets: string[];
  by_channel: Record<string, StatusCounts[]>;
}

export interface Summary {
  generated_at: string;
  /** Customers' deliveries only: ENS's own alert emails are in `internal`. */
  deliveries: { last_hour: ByChannel; last_day: ByChannel };
  /** Per minute over the last hour and per hour over the last day, per channel (customers' deliveries). */
  series: { per_minute: Series; per_hour: Series };
  /** ENS's own alert emails (the internal alert client and tenant), last 24 hours. */
  internal: { client_ids: string[]; tenant: string; last_day: ByChannel };
  failure_rates: {
    by_event_type: (FailureRow & { event_type: string })[];
    by_tenant: (FailureRow & { client_id: string; client_name: string | null; tenant: string })[];
  };
  callbacks: { backlog: number; dead_letters: number };
  /** Age of the oldest work nobody has taken, per channel (the dashboard's Backlog panel). */
  backlog_age: Backlog;
  /** The largest backlogs by client, tenant and channel, with the operator's weights. */
  waiting_flows: WaitingFlow[];
  provider_paces: ProviderPaceRow[];
  providers: ProviderHealth[];
  provider_window_minutes: number;
  alerts_firing: FiringAlert[];
  /** Suppressions added per day and email bounce and complaint rates per tenant (computed at most every few minutes). */
  consent: ConsentSummary;
}

function emptyByChannel(): ByChannel {
  return Object.fromEntries(CHANNELS.map((c) => [c, { pending: 0, sent: 0, failed: 0 }]));
}

function rate(sent: number, failed: number): number | null {
  const ended = sent + failed;
  return ended === 0 ? null : Math.round((failed / ended) * 10000) / 100;
}

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
export const DELIVERIES_SQL = `
SELECT grouping(event_type, client_id, minute, hour, channel) AS gset, internal,
       channel, status, event_type, client_id, tenant, minute, hour,
       count(*)::int AS day, count(*) FILTER (WHERE created_at >= now() - interval '1 hour')::int AS hour_n,
       count(*) FILTER (WHERE status = 'sent')::int AS sent, count(*) FILTER (WHERE status = 'failed')::int AS failed
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

const NOW_SQL = `SELECT (extract(epoch FROM date_trunc('minute', now())) * 1000)::float8 AS minute,
                        (extract(epoch FROM date_trunc('hour', now())) * 1000)::float8 AS hour`;

const MINUTE = 60_000;
const HOUR = 3_600_000;

function emptySeries(lastBucket: number, step: number, n: number): Series & { index: Map<number, number> } {
  const starts = Array.from({ length: n }, (_, i) => lastBucket - (n - 1 - i) * step);
  return {
    buckets: starts.map((t) => new Date(t).toISOString()),
    by_channel: Object.fromEntries(CHANNELS.map((c) => [c, starts.map(() => ({ pending: 0, sent: 0, failed: 0 }))])),
    index: new Map(starts.map((t, i) => [t, i])),
  };
}

const PROVIDER_WINDOW_MINUTES = 15;

const PROVIDERS_SQL = `
SELECT provider,
       count(*) FILTER (WHERE outcome = 'sent')::int AS sent,
       count(*) FILTER (WHERE outcome = 'transient')::int AS transient,
       count(*) FILTER (WHERE outcome = 'rate_limited')::int AS rate_limited,
       count(*) FILTER (WHERE outcome = 'permanent')::int AS permanent,
       count(*) FILTER (WHERE outcome = 'lost')::int AS lost,
       count(*) FILTER (WHERE outcome IS NULL)::int AS in_flight
  FROM attempts WHERE started_at >= now() - $1 * interval '1 minute'
 GROUP BY provider ORDER BY provider`;

export const FIRING_SQL = `
SELECT f.id::text AS firing_id, r.id::text AS rule_id, r.name, r.scope, r.value,
       to_char(f.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS started_at,
       f.total, f.failed, f.rate_percent::float8 AS rate_percent, r.threshold_percent::float8 AS threshold_percent
  FROM alert_firings f JOIN alert_rules r ON r.id = f.rule_id
 WHERE f.resolved_at IS NULL ORDER BY f.started_at DESC, f.id DESC`;

/** How many failure-rate rows the dashboard lists per table: the ones with most failures. */
const TOP = 20;

async function providerGauge(): Promise<Map<string, boolean>> {
  const out = new Map<string, boolean>();
  const m = await providerUp.get();
  for (const v of m.values) {
    const p = v.labels.provider;
    if (typeof p !== 'string') continue;
    // A provider serving several channels is up when it is up for any of them.
    out.set(p, (out.get(p) ?? false) || v.value === 1);
  }
  return out;
}

export type { InternalTraffic };

export async function loadSummary(db: Db): Promise<Summary> {
  const internal = await loadInternalTraffic(db);
  const [d, clock, backlog, dead, providers, firing, gauge, backlogAge, waitingFlows, paces, consent] = await Promise.all([
    db.query(DELIVERIES_SQL, [internal.clientIds, internal.tenant]),
    db.query<{ minute: number; hour: number }>(NOW_SQL),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM callbacks WHERE status = 'pending'`),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM callbacks WHERE status = 'dead'`),
    db.query(PROVIDERS_SQL, [PROVIDER_WINDOW_MINUTES]),
    db.query<FiringAlert>(FIRING_SQL),
    providerGauge(),
    loadBacklog(db),
    loadWaitingFlows(db),
    loadProviderPaces(db, PROVIDER_WINDOW_MINUTES),
    loadConsentSummary(db),
  ]);
  const lastHour = emptyByChannel();
  const lastDay = emptyByChannel();
  const internalDay = emptyByChannel();
  const perMinute = emptySeries(clock.rows[0]!.minute, MINUTE, 60);
  const perHour = emptySeries(clock.rows[0]!.hour, HOUR, 24);
  const byEvent: Summary['failure_rates']['by_event_type'] = [];
  const byTenant: Summary['failure_rates']['by_tenant'] = [];
  for (const r of d.rows) {
    const ch = r.channel as string;
    const st = r.status as keyof StatusCounts;
    if (r.internal) {
      if (r.gset === 30) (internalDay[ch] ??= { pending: 0, sent: 0, failed: 0 })[st] = r.day;
      continue;
    }
    if (r.gset === 30) {
      (lastHour[ch] ??= { pending: 0, sent: 0, failed: 0 })[st] = r.hour_n;
      (lastDay[ch] ??= { pending: 0, sent: 0, failed: 0 })[st] = r.day;
    } else if (r.gset === 26 || r.gset === 28) {
      const series = r.gset === 26 ? perMinute : perHour;
      const at = r.gset === 26 ? r.minute : r.hour;
      const i = at === null ? undefined : series.index.get(Number(at));
      const row = i === undefined ? undefined : series.by_channel[ch]?.[i];
      if (row) row[st] = r.day;
    } else if (r.gset === 15) {
      byEvent.push({ event_type: r.event_type, total: r.day, failed: r.failed, rate_percent: rate(r.sent, r.failed) });
    } else if (r.gset === 23) {
      byTenant.push({ client_id: r.client_id, client_name: null, tenant: r.tenant, total: r.day, failed: r.failed, rate_percent: rate(r.sent, r.failed) });
    }
  }
  const worstFirst = (a: FailureRow, b: FailureRow) => b.failed - a.failed || (b.rate_percent ?? 0) - (a.rate_percent ?? 0) || b.total - a.total;
  byEvent.sort((a, b) => worstFirst(a, b) || a.event_type.localeCompare(b.event_type));
  byTenant.sort((a, b) => worstFirst(a, b) || a.tenant.localeCompare(b.tenant));
  const topTenants = byTenant.slice(0, TOP);
  const names = await clientNames(db, topTenants.map((r) => r.client_id));
  for (const r of topTenants) r.client_name = names.get(r.client_id) ?? null;
  const seen = new Set<string>();
  const health: ProviderHealth[] = providers.rows.map((r) => {
    seen.add(r.provider);
    return { ...(r as Omit<ProviderHealth, 'up'>), up: gauge.has(r.provider) ? gauge.get(r.provider)! : null };
  });
  for (const [provider, up] of gauge) {
    if (!seen.has(provider)) health.push({ provider, sent: 0, transient: 0, rate_limited: 0, permanent: 0, lost: 0, in_flight: 0, up });
  }
  return {
    generated_at: new Date().toISOString(),
    deliveries: { last_hour: lastHour, last_day: lastDay },
    series: { per_minute: { buckets: perMinute.buckets, by_channel: perMinute.by_channel }, per_hour: { buckets: perHour.buckets, by_channel: perHour.by_channel } },
    internal: { client_ids: internal.clientIds, tenant: internal.tenant, last_day: internalDay },
    failure_rates: { by_event_type: byEvent.slice(0, TOP), by_tenant: topTenants },
    callbacks: { backlog: backlog.rows[0]!.n, dead_letters: dead.rows[0]!.n },
    backlog_age: backlogAge,
    waiting_flows: waitingFlows.map((f) => (isInternal(internal, f.client_id, f.tenant) ? { ...f, internal: true } : f)),
    provider_paces: paces,
    providers: health,
    provider_window_minutes: PROVIDER_WINDOW_MINUTES,
    alerts_firing: firing.rows,
    consent,
  };
}
