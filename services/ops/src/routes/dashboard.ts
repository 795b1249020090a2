import type { FastifyInstance } from 'fastify';
import { CHANNELS } from '@ens/core';
import {
  loadSummary,
  STATUSES,
  type ByChannel,
  type FailureRow,
  type FiringAlert,
  type Summary,
} from '../queries/summary.ts';
import { ALERTS_CLIENT_NAME } from '../alerts/notify.ts';
import { pageContext, queryValue, sendPage, type ConsoleDeps } from '../request-context.ts';
import { seriesLegend, seriesPanel } from '../views/time-series.ts';
import { backlogPanel, backlogWarning } from '../views/backlog-panel.ts';
import { fairDeliveryPanel } from '../views/fair-delivery-panel.ts';
import { bounceRatesPanel, suppressionsPerDayPanel } from '../views/consent-panels.ts';
import { clientLink, clip, percent, query, scrollable, time } from '../views/components.ts';

/** How often the dashboard reloads its numbers, unless ?refresh= says otherwise. */
const REFRESH_SECONDS = 30;
import { html, type Html } from '../views/html.ts';
import { consolePage } from '../views/layout.ts';

function channelTable(id: string, caption: string, counts: ByChannel): Html {
  return scrollable(
    caption,
    html`<table id="${id}">
<caption>${caption}</caption>
<thead><tr><th scope="col">Channel</th>${STATUSES.map((s) => html`<th scope="col" class="num">${s}</th>`)}<th scope="col" class="num">total</th><th scope="col" class="num">failure rate</th></tr></thead>
<tbody>
${CHANNELS.map((c) => {
  const row = counts[c] ?? { pending: 0, sent: 0, failed: 0 };
  const total = STATUSES.reduce((s, st) => s + row[st], 0);
  const ended = row.sent + row.failed;
  return html`<tr data-channel="${c}"><th scope="row">${c}</th>${STATUSES.map((s) => html`<td data-status="${s}">${row[s]}</td>`)}<td class="num">${total}</td><td class="num" data-rate>${percent(ended === 0 ? null : Math.round((row.failed / ended) * 10000) / 100)}</td></tr>`;
})}
</tbody>
</table>`,
  );
}

/** A failure rate's trend: the last hour against the 23 hours before, in an arrow and words. */
function trendCell(t: FailureRow['trend']): Html {
  const said = `last hour ${percent(t.last_hour)}, the 23 hours before ${percent(t.before)}`;
  // Short enough for the half-width tables: an arrow and the last hour's rate; words for readers.
  const hidden = (w: string) => html`<span class="visually-hidden">${w}</span>`;
  const shown = {
    rising: html`<span aria-hidden="true">↑</span> ${hidden('rising to ')}${percent(t.last_hour)}`,
    falling: html`<span aria-hidden="true">↓</span> ${hidden('falling to ')}${percent(t.last_hour)}`,
    steady: html`<span aria-hidden="true">→</span> ${hidden('steady at ')}${percent(t.last_hour)}`,
    new: html`new`,
    quiet: html`<span class="muted" aria-hidden="true">—</span>${hidden('none ended in the last hour')}`,
  }[t.direction];
  return html`<td class="trend trend-${t.direction}" data-trend="${t.direction}" title="${said}">${shown}</td>`;
}

export function firingTable(alerts: FiringAlert[]): Html {
  if (alerts.length === 0) return html`<p class="ok-note">No alert is firing.</p>`;
  return scrollable(
    'Alerts firing now',
    html`<table id="firing-alerts">
<caption class="visually-hidden">Alerts firing now</caption>
<thead><tr><th scope="col">Rule</th><th scope="col">Watches</th><th scope="col" class="num">Failure rate</th><th scope="col" class="num">Threshold</th><th scope="col" class="num">Ended / failed</th><th scope="col">Since</th></tr></thead>
<tbody>
${alerts.map((a) => html`<tr data-rule-id="${a.rule_id}" class="firing"><td>${clip(a.name)}</td><td>${a.scope === 'event_type' ? 'event type' : 'tenant'} ${clip(a.value)}</td><td class="num">${percent(a.rate_percent)}</td><td class="num">${percent(a.threshold_percent)}</td><td class="num">${a.total} / ${a.failed}</td><td>${time(a.started_at)}</td></tr>`)}
</tbody>
</table>`,
  );
}

/** Where ENS's own alert emails are counted, apart from the customers' numbers. */
function internalNote(s: Summary): Html {
  const t = CHANNELS.reduce(
    (a, c) => {
      const r = s.internal.last_day[c];
      return r
        ? { pending: a.pending + r.pending, sent: a.sent + r.sent, failed: a.failed + r.failed }
        : a;
    },
    { pending: 0, sent: 0, failed: 0 },
  );
  return html`<p class="muted" id="internal-traffic">Not counted above: ENS's own alert emails (client <code>${ALERTS_CLIENT_NAME}</code>, tenant <code>${s.internal.tenant}</code>), last 24 hours:
<span data-count="sent">${t.sent}</span> sent, <span data-count="failed">${t.failed}</span> failed, <span data-count="pending">${t.pending}</span> pending.</p>`;
}

/** The callbacks' two numbers, on one line: what waits to be posted, what ran out of attempts. */
function callbacksPanel(s: Summary): Html {
  return html`<section id="callbacks-health" aria-labelledby="callbacks-h">
<h2 id="callbacks-h">Callbacks</h2>
<dl class="inline-stats">
<div><dt>Waiting to be posted</dt><dd id="callback-backlog">${s.callbacks.backlog}</dd></div>
<div><dt><a href="/ops/dead-letters" title="Review dead letters">Dead letters</a></dt><dd id="dead-letters">${s.callbacks.dead_letters}</dd></div>
</dl>
</section>`;
}

function providerPanel(s: Summary): Html {
  return html`<section id="provider-health" aria-labelledby="provider-health-h">
<h2 id="provider-health-h">Provider health, last ${s.provider_window_minutes} minutes</h2>
${
  s.providers.length === 0
    ? html`<p class="muted">No send attempts in the last ${s.provider_window_minutes} minutes.</p>`
    : scrollable(
        'Send attempts per provider',
        html`<table id="providers">
<caption>Send attempts per provider; failures by kind</caption>
<thead><tr><th scope="col">Provider</th><th scope="col">State</th><th scope="col" class="num">Sent</th><th scope="col" class="num">Transient</th><th scope="col" class="num">Rate limited</th><th scope="col" class="num">Permanent</th><th scope="col" class="num">Lost</th><th scope="col" class="num">In flight</th></tr></thead>
<tbody>
${s.providers.map((p) => {
  const troubled = p.up === false || (p.transient + p.rate_limited > 0 && p.sent === 0);
  const state = p.up === false ? 'taken out' : troubled ? 'failing' : 'healthy';
  return html`<tr data-provider="${p.provider}"><th scope="row"><code class="clip" title="${p.provider}">${p.provider}</code></th><td><span class="badge ${troubled ? 'status-failed' : 'status-sent'}">${state}</span></td><td class="num">${p.sent}</td><td class="num">${p.transient}</td><td class="num">${p.rate_limited}</td><td class="num">${p.permanent}</td><td class="num">${p.lost}</td><td class="num">${p.in_flight}</td></tr>`;
})}
</tbody>
</table>`,
      )
}
<p class="muted">"Taken out" is the fail-over state of this process's worker; the counts come from the database.</p>
</section>`;
}

/** The failure rates of the last day, by event type and by tenant, side by side. */
function failureRatesPanel(s: Summary): Html {
  const fr = s.failure_rates;
  const of = (shown: number, all: number, noun: string) =>
    shown < all ? `the first ${shown} of ${all.toLocaleString('en')} ${noun}` : '';
  const cut = [
    of(fr.by_event_type.length, fr.event_types, 'event types'),
    of(fr.by_tenant.length, fr.tenants, 'tenants'),
  ].filter(Boolean);
  return html`<section id="failure-rates" aria-labelledby="failure-rates-h" class="grid-2">
<div class="section-head span-2"><h2 id="failure-rates-h">Failure rates, last 24 hours</h2>
<p class="legend" id="failure-rates-note">Failed among the deliveries that ended (sent or failed), most failures first, at most 20 rows each${cut.length ? ` (${cut.join('; ')})` : ''}; the trend sets the last hour against the 23 hours before it.</p></div>
${scrollable(
  'Failure rates by event type',
  html`<table id="failures-by-event-type">
<caption class="visually-hidden">Failure rates by event type</caption>
<thead><tr><th scope="col">Event type</th><th scope="col" class="num">Deliveries</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Failure rate</th><th scope="col">Trend</th></tr></thead>
<tbody>
${fr.by_event_type.length === 0 ? html`<tr><td colspan="5" class="muted">No deliveries in the last 24 hours.</td></tr>` : ''}
${fr.by_event_type.map((r) => html`<tr data-event-type="${r.event_type}"><td><a class="clip" title="${r.event_type}" href="/ops/deliveries${query({ event_type: r.event_type, status: 'failed' })}">${r.event_type}</a></td><td class="num">${r.total}</td><td class="num">${r.failed}</td><td class="num">${percent(r.rate_percent)}</td>${trendCell(r.trend)}</tr>`)}
</tbody>
</table>`,
)}
${scrollable(
  'Failure rates by tenant',
  html`<table id="failures-by-tenant">
<caption class="visually-hidden">Failure rates by tenant</caption>
<thead><tr><th scope="col">Tenant</th><th scope="col">Client</th><th scope="col" class="num">Deliveries</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Failure rate</th><th scope="col">Trend</th></tr></thead>
<tbody>
${fr.by_tenant.length === 0 ? html`<tr><td colspan="6" class="muted">No deliveries in the last 24 hours.</td></tr>` : ''}
${fr.by_tenant.map((r) => html`<tr data-tenant="${r.tenant}" data-client="${r.client_id}"><td><a class="clip" title="${r.tenant}" href="/ops/deliveries${query({ tenant: r.tenant, client: r.client_id, status: 'failed' })}">${r.tenant}</a></td><td>${clientLink(r.client_id, r.client_name ?? undefined)}</td><td class="num">${r.total}</td><td class="num">${r.failed}</td><td class="num">${percent(r.rate_percent)}</td>${trendCell(r.trend)}</tr>`)}
</tbody>
</table>`,
)}
</section>`;
}

/**
 * The dashboard, at most two screens at 1,280 x 800 with a day of ordinary traffic (issue 25;
 * test/console/dashboard-readable.test.ts measures it): each number is shown once (the charts name
 * their channel, the tables under them hold the counts), panels of one line or one narrow table
 * share a row, and the wide tables get the full width.
 */
function dashboard(s: Summary, refreshSeconds: number): Html {
  const fairIdle = s.waiting_flows.length === 0 && s.provider_paces.length === 0;
  return html`<div class="page-head"><h1>Dashboard</h1>
<p class="muted" id="generated" data-live>Numbers from the database at ${time(s.generated_at)}; the page refreshes itself every ${refreshSeconds} s.</p>
<button type="button" class="button secondary button-small" id="refresh-toggle" aria-pressed="false" hidden>Pause refresh</button></div>
<div id="live" data-live data-refresh="${refreshSeconds}">
${backlogWarning(s.backlog_age)}

<div class="dash-row grid-3">
<section id="alerts-firing" aria-labelledby="alerts-firing-h"${s.alerts_firing.length > 0 ? html` class="span-all"` : ''}>
<h2 id="alerts-firing-h">Alerts firing</h2>
${firingTable(s.alerts_firing)}
</section>
${callbacksPanel(s)}
${
  fairIdle
    ? html`<section id="fair-delivery" aria-labelledby="fair-delivery-h"><h2 id="fair-delivery-h">Fair delivery</h2>
<p class="ok-note">Nothing is waiting for a send, and no provider is paced.</p></section>`
    : ''
}
</div>

<section id="traffic" aria-labelledby="traffic-h">
<div class="section-head"><h2 id="traffic-h">Deliveries per minute, last hour</h2>${seriesLegend()}<p class="legend">by the minute or hour the deliveries were accepted in, UTC; a delivery counts where it is now (pending until it ends)</p></div>
${seriesPanel(s.series.per_minute, 'minute', CHANNELS)}
<div class="section-head"><h2 id="traffic-day-h">Deliveries per hour, last 24 hours</h2></div>
${seriesPanel(s.series.per_hour, 'hour', CHANNELS)}
</section>

<section id="deliveries" aria-labelledby="deliveries-h" class="grid-2">
<h2 id="deliveries-h" class="span-2 visually-hidden">Deliveries by channel and status</h2>
<div>
${channelTable('deliveries-last-hour', 'Created in the last hour, by channel and status', s.deliveries.last_hour)}
</div>
<div>
${channelTable('deliveries-last-day', 'Created in the last 24 hours, by channel and status', s.deliveries.last_day)}
</div>
<div class="span-2">${internalNote(s)}</div>
</section>

<div class="dash-row grid-health">
${backlogPanel(s.backlog_age)}
${providerPanel(s)}
</div>

${fairIdle ? '' : fairDeliveryPanel(s.waiting_flows, s.provider_paces, s.provider_window_minutes)}

${failureRatesPanel(s)}

${suppressionsPerDayPanel(s.consent)}

${bounceRatesPanel(s.consent, (clientId, tenant) => s.internal.client_ids.includes(clientId) && tenant === s.internal.tenant)}
</div>`;
}

export function dashboardRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get('/', async (req, reply) => {
    // ?refresh=N (2 to 3600 seconds) sets the self-refresh period; the default suits a wall screen.
    const asked = Number(queryValue(req.query, 'refresh'));
    const refresh =
      Number.isInteger(asked) && asked >= 2 && asked <= 3600 ? asked : REFRESH_SECONDS;
    const summary = await loadSummary(deps.rt.db);
    return sendPage(
      reply,
      200,
      consolePage(
        pageContext(req, reply, deps, 'dashboard'),
        'Dashboard',
        dashboard(summary, refresh),
      ),
    );
  });

  app.get('/api/summary', async (_req, reply) => {
    const summary = await loadSummary(deps.rt.db);
    return reply.header('cache-control', 'no-store').send(summary);
  });
}
