import type { FastifyInstance } from 'fastify';
import { CHANNELS } from '@ens/core';
import { loadDelivery, searchDeliveries, SearchTooSlow, type DeliveryDetail, type DeliveryFilters, type DeliveryListRow } from '../queries/deliveries.ts';
import { STATUSES } from '../queries/summary.ts';
import { pageContext, queryValue, sendPage, type ConsoleDeps } from '../request-context.ts';
import { field, orDash, pager, query, selectField, statusBadge, time } from '../views/components.ts';
import { html, type Html } from '../views/html.ts';
import { consolePage } from '../views/layout.ts';

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const TEXT_FILTERS = [
  { name: 'reference', label: 'Reference' },
  { name: 'recipient', label: 'Recipient' },
  { name: 'tenant', label: 'Tenant' },
  { name: 'client', label: 'Client' },
  { name: 'event_type', label: 'Event type' },
] as const;

type FilterName = 'reference' | 'recipient' | 'tenant' | 'client' | 'channel' | 'status' | 'event_type' | 'since' | 'until';
type Raw = Record<FilterName | 'after', string>;

/**
 * A time as typed: ISO 8601 with an offset, or a datetime-local value (no offset), taken as UTC.
 * Returns the ISO string, or null when it is not a time.
 */
export function parseTime(v: string): string | null {
  const withZone = /[zZ]|[+-]\d\d:?\d\d$/.test(v) ? v : `${v}Z`;
  if (!/^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?)?/.test(v)) return null;
  const d = new Date(withZone.replace(' ', 'T'));
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

function validate(raw: Raw): { filters: DeliveryFilters; errors: Partial<Record<FilterName | 'after', string>> } {
  const errors: Partial<Record<FilterName | 'after', string>> = {};
  const filters: DeliveryFilters = {};
  for (const f of TEXT_FILTERS) {
    const v = raw[f.name];
    if (v.length > 320) errors[f.name] = 'Too long: at most 320 characters.';
    else if (v) filters[f.name] = v;
  }
  if (raw.channel) {
    if ((CHANNELS as readonly string[]).includes(raw.channel)) filters.channel = raw.channel;
    else errors.channel = `Choose one of ${CHANNELS.join(', ')}.`;
  }
  if (raw.status) {
    if ((STATUSES as readonly string[]).includes(raw.status)) filters.status = raw.status;
    else errors.status = `Choose one of ${STATUSES.join(', ')}.`;
  }
  for (const k of ['since', 'until'] as const) {
    if (!raw[k]) continue;
    const t = parseTime(raw[k]);
    if (t) filters[k] = t;
    else errors[k] = 'Not a time: use 2025-01-31T14:00 (UTC) or ISO 8601 with an offset.';
  }
  if (filters.since && filters.until && filters.since >= filters.until) errors.until = 'Must be after "Since".';
  if (raw.after) {
    if (UUID.test(raw.after)) filters.after = raw.after;
    else errors.after = 'The page link is damaged; start the search again.';
  }
  return { filters, errors };
}

function filterForm(raw: Raw, errors: Partial<Record<string, string>>): Html {
  return html`<form method="get" action="/ops/deliveries" class="filters" role="search" aria-label="Search deliveries">
${TEXT_FILTERS.map((f) => field({ name: f.name, label: f.label, value: raw[f.name], error: errors[f.name] }))}
${selectField({ name: 'channel', label: 'Channel', value: raw.channel, error: errors.channel, options: [{ value: '', label: 'Any' }, ...CHANNELS.map((c) => ({ value: c, label: c }))] })}
${selectField({ name: 'status', label: 'Status', value: raw.status, error: errors.status, options: [{ value: '', label: 'Any' }, ...STATUSES.map((s) => ({ value: s, label: s }))] })}
${field({ name: 'since', label: 'Since', value: raw.since, error: errors.since, hint: 'UTC, e.g. 2025-01-31T14:00' })}
${field({ name: 'until', label: 'Until', value: raw.until, error: errors.until, hint: 'UTC, exclusive' })}
<div class="actions"><button type="submit" class="button">Search</button> <a href="/ops/deliveries" class="button secondary">Clear</a></div>
</form>`;
}

function resultsTable(rows: DeliveryListRow[]): Html {
  return html`<table id="deliveries">
<caption>Deliveries, newest first</caption>
<thead><tr><th scope="col">Delivery</th><th scope="col">Created</th><th scope="col">Status</th><th scope="col">Channel</th><th scope="col">Recipient</th><th scope="col">Tenant</th><th scope="col">Client</th><th scope="col">Event type</th><th scope="col">Reference</th><th scope="col" class="num">Attempts</th><th scope="col">Last error</th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="11" class="muted">No delivery matches.</td></tr>` : ''}
${rows.map((r) => html`<tr data-delivery-id="${r.id}">
<td><a href="/ops/deliveries/${r.id}"><code>${r.id}</code></a></td><td>${time(r.created_at)}</td><td>${statusBadge(r.status)}</td><td>${r.channel}</td><td>${r.recipient}</td>
<td>${r.tenant}</td><td><code>${r.client_id}</code></td><td>${r.event_type}</td><td>${orDash(r.reference)}</td><td class="num">${r.attempts}</td><td class="error-text">${orDash(r.last_error)}</td></tr>`)}
</tbody>
</table>`;
}

function detailPage(d: DeliveryDetail): Html {
  const x = d.delivery as Record<string, string | number | null>;
  const facts: [string, Html][] = [
    ['Status', statusBadge(String(x.status))],
    ['Channel', html`${x.channel}`],
    ['Recipient', html`${x.recipient}`],
    ['Client', html`<a href="/ops/clients/${encodeURIComponent(String(x.client_id))}"><code>${x.client_id}</code></a>`],
    ['Tenant', html`${x.tenant}`],
    ['Event type', html`${x.event_type}`],
    ['Reference', orDash(x.reference)],
    ['Handoff', html`<code>${x.handoff_id}</code>`],
    ['Provider', orDash(x.provider)],
    ['Provider message id', orDash(x.provider_message_id)],
    ['Attempts', html`${x.attempts}`],
    ['Created', time(x.created_at as string)],
    ['Sent', time(x.sent_at as string | null)],
    ['Delivered', time(x.delivered_at as string | null)],
    ['Read', time(x.read_at as string | null)],
    ['Last change (feed)', time(x.updated_at as string | null)],
    ['Next attempt', x.status === 'pending' ? time(x.next_attempt_at as string) : html`<span class="muted">—</span>`],
    ['Last error', orDash(x.last_error)],
    ['Callback URL', orDash(x.callback_url)],
  ];
  return html`<h1>Delivery <code>${x.id}</code></h1>
<p><a href="/ops/deliveries${query({ client: String(x.client_id), tenant: String(x.tenant) })}">Other deliveries of this tenant</a></p>
<dl class="facts">${facts.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>

<h2>Attempts</h2>
<table id="attempts">
<caption>Send attempts to providers</caption>
<thead><tr><th scope="col" class="num">#</th><th scope="col">Provider</th><th scope="col">Outcome</th><th scope="col">Error</th><th scope="col">Provider message id</th><th scope="col">Started</th><th scope="col">Finished</th></tr></thead>
<tbody>
${d.attempts.length === 0 ? html`<tr><td colspan="7" class="muted">No attempt yet.</td></tr>` : ''}
${d.attempts.map((a) => html`<tr><td class="num">${a.number}</td><td><code>${a.provider}</code></td><td>${a.outcome ? statusBadge(String(a.outcome)) : html`<span class="muted">in flight</span>`}</td><td class="error-text">${orDash(a.error)}</td><td>${orDash(a.provider_message_id)}</td><td>${time(a.started_at as string)}</td><td>${time(a.finished_at as string | null)}</td></tr>`)}
</tbody>
</table>

<h2>Provider updates</h2>
<table id="events">
<caption>Status reports from the provider (webhooks)</caption>
<thead><tr><th scope="col">Kind</th><th scope="col">Occurred</th><th scope="col">Received</th><th scope="col">Detail</th></tr></thead>
<tbody>
${d.events.length === 0 ? html`<tr><td colspan="4" class="muted">No report from the provider.</td></tr>` : ''}
${d.events.map((e) => html`<tr><td>${statusBadge(String(e.kind))}</td><td>${time(e.occurred_at as string)}</td><td>${time(e.received_at as string)}</td><td>${orDash(e.detail)}</td></tr>`)}
</tbody>
</table>

<h2>Callbacks</h2>
<table id="callbacks">
<caption>Callback posts to the client</caption>
<thead><tr><th scope="col">Callback</th><th scope="col">URL</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last error</th><th scope="col">Created</th></tr></thead>
<tbody>
${d.callbacks.length === 0 ? html`<tr><td colspan="6" class="muted">No callback (none asked for, or the delivery has not ended).</td></tr>` : ''}
${d.callbacks.map((c) => html`<tr data-callback-id="${c.id}"><td><code>${c.id}</code></td><td class="wrap">${c.url}</td><td>${statusBadge(String(c.status))}</td>
<td>${c.attempts_list.length === 0 ? html`<span class="muted">none yet</span>` : html`<ol class="attempt-list">${c.attempts_list.map((a) => html`<li>#${a.number} ${time(a.at as string)}: ${a.http_status !== null ? html`HTTP ${a.http_status}` : ''}${a.error ? html` <span class="error-text">${a.error}</span>` : ''}</li>`)}</ol>`}</td>
<td class="error-text">${orDash(c.last_error)}</td><td>${time(c.created_at as string)}</td></tr>`)}
</tbody>
</table>`;
}

export function deliveryRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get('/deliveries', async (req, reply) => {
    const q = req.query;
    const raw = Object.fromEntries(
      (['reference', 'recipient', 'tenant', 'client', 'channel', 'status', 'event_type', 'since', 'until', 'after'] as const).map((k) => [k, queryValue(q, k)]),
    ) as Raw;
    const { filters, errors } = validate(raw);
    const ctx = pageContext(req, reply, deps, 'deliveries');
    const head = html`<h1>Deliveries</h1>${filterForm(raw, errors)}`;
    if (Object.keys(errors).length > 0) {
      const msg = errors.after ? html`<p class="error-summary" role="alert">${errors.after}</p>` : html`<p class="error-summary" role="alert">Fix the marked fields to search.</p>`;
      return sendPage(reply, 400, consolePage(ctx, 'Deliveries', html`${head}${msg}`));
    }
    try {
      const { rows, next } = await searchDeliveries(deps.rt.db, filters);
      const { after: _after, ...keep } = raw;
      return sendPage(reply, 200, consolePage(ctx, 'Deliveries', html`${head}${resultsTable(rows)}${pager(next, (a) => `/ops/deliveries${query({ ...keep, after: a })}`)}`));
    } catch (e) {
      if (!(e instanceof SearchTooSlow)) throw e;
      return sendPage(
        reply,
        400,
        consolePage(ctx, 'Deliveries', html`${head}<p class="error-summary" role="alert">This search took too long. Narrow it with a time range (Since, Until), a client or a tenant.</p>`),
      );
    }
  });

  app.get<{ Params: { id: string } }>('/deliveries/:id', async (req, reply) => {
    const ctx = pageContext(req, reply, deps, 'deliveries');
    const d = UUID.test(req.params.id) ? await loadDelivery(deps.rt.db, req.params.id) : null;
    if (!d) return sendPage(reply, 404, consolePage(ctx, 'Delivery not found', html`<h1>Delivery not found</h1><p>No delivery has the id <code>${req.params.id}</code>.</p><p><a href="/ops/deliveries">Search deliveries</a></p>`));
    return sendPage(reply, 200, consolePage(ctx, `Delivery ${req.params.id}`, detailPage(d)));
  });
}
