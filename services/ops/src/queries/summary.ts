import { CHANNELS } from '@ens/core';
import { providerUp, type Db } from '@ens/core/internal';
import { loadBacklog, type Backlog } from './backlog.ts';
import { loadProviderPaces, loadWaitingFlows, type ProviderPaceRow, type WaitingFlow } from './fair-delivery.ts';

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

export interface Summary {
  generated_at: string;
  deliveries: { last_hour: ByChannel; last_day: ByChannel };
  failure_rates: {
    by_event_type: (FailureRow & { event_type: string })[];
    by_tenant: (FailureRow & { client_id: string; tenant: string })[];
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
 * channel and status (with the last hour as a FILTER), by event type, and by tenant. The id range
 * (ids are UUIDv7, see ens_uuid7_floor) makes it a range scan of the primary key.
 */
const DELIVERIES_SQL = `
SELECT grouping(channel, status) AS g_cs, grouping(event_type) AS g_e,
       channel, status, event_type, client_id, tenant,
       count(*)::int AS day, count(*) FILTER (WHERE created_at >= now() - interval '1 hour')::int AS hour,
       count(*) FILTER (WHERE status = 'sent')::int AS sent, count(*) FILTER (WHERE status = 'failed')::int AS failed
  FROM deliveries
 WHERE id >= ens_uuid7_floor(now() - interval '1 day') AND created_at >= now() - interval '1 day'
 GROUP BY GROUPING SETS ((channel, status), (event_type), (client_id, tenant))`;

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

export async function loadSummary(db: Db): Promise<Summary> {
  const [d, backlog, dead, providers, firing, gauge, backlogAge, waitingFlows, paces] = await Promise.all([
    db.query(DELIVERIES_SQL),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM callbacks WHERE status = 'pending'`),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM callbacks WHERE status = 'dead'`),
    db.query(PROVIDERS_SQL, [PROVIDER_WINDOW_MINUTES]),
    db.query<FiringAlert>(FIRING_SQL),
    providerGauge(),
    loadBacklog(db),
    loadWaitingFlows(db),
    loadProviderPaces(db, PROVIDER_WINDOW_MINUTES),
  ]);
  const lastHour = emptyByChannel();
  const lastDay = emptyByChannel();
  const byEvent: Summary['failure_rates']['by_event_type'] = [];
  const byTenant: Summary['failure_rates']['by_tenant'] = [];
  for (const r of d.rows) {
    if (r.g_cs === 0) {
      const ch = r.channel as string;
      const st = r.status as keyof StatusCounts;
      lastHour[ch] ??= { pending: 0, sent: 0, failed: 0 };
      lastDay[ch] ??= { pending: 0, sent: 0, failed: 0 };
      lastHour[ch]![st] = r.hour;
      lastDay[ch]![st] = r.day;
    } else if (r.g_e === 0) {
      byEvent.push({ event_type: r.event_type, total: r.day, failed: r.failed, rate_percent: rate(r.sent, r.failed) });
    } else {
      byTenant.push({ client_id: r.client_id, tenant: r.tenant, total: r.day, failed: r.failed, rate_percent: rate(r.sent, r.failed) });
    }
  }
  const worstFirst = (a: FailureRow, b: FailureRow) => b.failed - a.failed || (b.rate_percent ?? 0) - (a.rate_percent ?? 0) || b.total - a.total;
  byEvent.sort((a, b) => worstFirst(a, b) || a.event_type.localeCompare(b.event_type));
  byTenant.sort((a, b) => worstFirst(a, b) || a.tenant.localeCompare(b.tenant));
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
    failure_rates: { by_event_type: byEvent.slice(0, TOP), by_tenant: byTenant.slice(0, TOP) },
    callbacks: { backlog: backlog.rows[0]!.n, dead_letters: dead.rows[0]!.n },
    backlog_age: backlogAge,
    waiting_flows: waitingFlows,
    provider_paces: paces,
    providers: health,
    provider_window_minutes: PROVIDER_WINDOW_MINUTES,
    alerts_firing: firing.rows,
  };
}
