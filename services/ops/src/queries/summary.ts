import { CHANNELS } from '@ens/core';
import {
  callbackQueueCounts,
  countRecentDeliveries,
  loadProviderPaces,
  loadWaitingFlows,
  providerOutcomes,
  providerUp,
  type Db,
  type ProviderPaceRow,
  type WaitingFlow,
} from '@ens/core/internal';
import { loadBacklog, type Backlog } from './backlog.ts';
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
  /**
   * The trend: the rate of the last hour against the 23 hours before it (each null when nothing
   * of that span has ended), and which way it went by more than a point.
   */
  trend: { last_hour: number | null; before: number | null; direction: Trend };
}

export type Trend = 'rising' | 'falling' | 'steady' | 'new' | 'quiet';

/** Last hour against the hours before: a change of a percentage point or less is steady. */
function trendOf(r: { sent: number; failed: number; hour_sent: number; hour_failed: number }) {
  const lastHour = rate(r.hour_sent, r.hour_failed);
  const before = rate(r.sent - r.hour_sent, r.failed - r.hour_failed);
  const direction: Trend =
    lastHour === null
      ? 'quiet'
      : before === null
        ? 'new'
        : lastHour > before + 1
          ? 'rising'
          : lastHour < before - 1
            ? 'falling'
            : 'steady';
  return { last_hour: lastHour, before, direction };
}

export interface ProviderHealth {
  provider: string;
  sent: number;
  transient: number;
  rate_limited: number;
  permanent: number;
  lost: number;
  in_flight: number;
  /**
   * The in-process ens_provider_up gauge (1 up, 0 taken out); null when no worker runs in this
   * process.
   */
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
  /**
   * Per minute over the last hour and per hour over the last day, per channel (customers'
   * deliveries).
   */
  series: { per_minute: Series; per_hour: Series };
  /** ENS's own alert emails (the internal alert client and tenant), last 24 hours. */
  internal: { client_ids: string[]; tenant: string; last_day: ByChannel };
  failure_rates: {
    by_event_type: (FailureRow & { event_type: string })[];
    by_tenant: (FailureRow & { client_id: string; client_name: string | null; tenant: string })[];
    /** How many event types and tenants had deliveries in the last day (the lists show the top). */
    event_types: number;
    tenants: number;
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
  /**
   * Suppressions added per day and email bounce and complaint rates per tenant (computed at most
   * every few minutes).
   */
  consent: ConsentSummary;
}

function emptyByChannel(): ByChannel {
  return Object.fromEntries(CHANNELS.map((c) => [c, { pending: 0, sent: 0, failed: 0 }]));
}

/** The channel's counts in `by`, added at zero for a channel the list of channels lacks. */
function countsOf(by: ByChannel, channel: string): StatusCounts {
  by[channel] ??= { pending: 0, sent: 0, failed: 0 };
  return by[channel];
}

function rate(sent: number, failed: number): number | null {
  const ended = sent + failed;
  return ended === 0 ? null : Math.round((failed / ended) * 10000) / 100;
}

const NOW_SQL = `SELECT (extract(epoch FROM date_trunc('minute', now())) * 1000)::float8 AS minute,
                        (extract(epoch FROM date_trunc('hour', now())) * 1000)::float8 AS hour`;

const MINUTE = 60_000;
const HOUR = 3_600_000;

function emptySeries(
  lastBucket: number,
  step: number,
  n: number,
): Series & { index: Map<number, number> } {
  const starts = Array.from({ length: n }, (_, i) => lastBucket - (n - 1 - i) * step);
  return {
    buckets: starts.map((t) => new Date(t).toISOString()),
    by_channel: Object.fromEntries(
      CHANNELS.map((c) => [c, starts.map(() => ({ pending: 0, sent: 0, failed: 0 }))]),
    ),
    index: new Map(starts.map((t, i) => [t, i])),
  };
}

const PROVIDER_WINDOW_MINUTES = 15;

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
  const [d, clock, callbacks, providers, firing, gauge, backlogAge, waitingFlows, paces, consent] =
    await Promise.all([
      countRecentDeliveries(db, internal),
      db.query<{ minute: number; hour: number }>(NOW_SQL),
      callbackQueueCounts(db),
      providerOutcomes(db, PROVIDER_WINDOW_MINUTES),
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
  for (const r of d) {
    const ch = r.channel;
    const st = r.status;
    if (r.internal) {
      if (r.gset === 30) countsOf(internalDay, ch)[st] = r.day;
      continue;
    }
    if (r.gset === 30) {
      countsOf(lastHour, ch)[st] = r.hour_n;
      countsOf(lastDay, ch)[st] = r.day;
    } else if (r.gset === 26 || r.gset === 28) {
      const series = r.gset === 26 ? perMinute : perHour;
      const at = r.gset === 26 ? r.minute : r.hour;
      const i = at === null ? undefined : series.index.get(Number(at));
      const row = i === undefined ? undefined : series.by_channel[ch]?.[i];
      if (row) row[st] = r.day;
    } else if (r.gset === 15) {
      byEvent.push({
        event_type: r.event_type,
        total: r.day,
        failed: r.failed,
        rate_percent: rate(r.sent, r.failed),
        trend: trendOf(r),
      });
    } else if (r.gset === 23) {
      byTenant.push({
        client_id: r.client_id,
        client_name: null,
        tenant: r.tenant,
        total: r.day,
        failed: r.failed,
        rate_percent: rate(r.sent, r.failed),
        trend: trendOf(r),
      });
    }
  }
  const worstFirst = (a: FailureRow, b: FailureRow) =>
    b.failed - a.failed || (b.rate_percent ?? 0) - (a.rate_percent ?? 0) || b.total - a.total;
  byEvent.sort((a, b) => worstFirst(a, b) || a.event_type.localeCompare(b.event_type));
  byTenant.sort((a, b) => worstFirst(a, b) || a.tenant.localeCompare(b.tenant));
  const topTenants = byTenant.slice(0, TOP);
  const names = await clientNames(
    db,
    topTenants.map((r) => r.client_id),
  );
  for (const r of topTenants) r.client_name = names.get(r.client_id) ?? null;
  const seen = new Set<string>();
  const health: ProviderHealth[] = providers.map((r) => {
    seen.add(r.provider);
    return {
      ...r,
      up: gauge.has(r.provider) ? gauge.get(r.provider)! : null,
    };
  });
  for (const [provider, up] of gauge) {
    if (!seen.has(provider))
      health.push({
        provider,
        sent: 0,
        transient: 0,
        rate_limited: 0,
        permanent: 0,
        lost: 0,
        in_flight: 0,
        up,
      });
  }
  return {
    generated_at: new Date().toISOString(),
    deliveries: { last_hour: lastHour, last_day: lastDay },
    series: {
      per_minute: { buckets: perMinute.buckets, by_channel: perMinute.by_channel },
      per_hour: { buckets: perHour.buckets, by_channel: perHour.by_channel },
    },
    internal: { client_ids: internal.clientIds, tenant: internal.tenant, last_day: internalDay },
    failure_rates: {
      by_event_type: byEvent.slice(0, TOP),
      by_tenant: topTenants,
      event_types: byEvent.length,
      tenants: byTenant.length,
    },
    callbacks,
    backlog_age: backlogAge,
    waiting_flows: waitingFlows.map((f) =>
      isInternal(internal, f.client_id, f.tenant) ? { ...f, internal: true } : f,
    ),
    provider_paces: paces,
    providers: health,
    provider_window_minutes: PROVIDER_WINDOW_MINUTES,
    alerts_firing: firing.rows,
    consent,
  };
}
