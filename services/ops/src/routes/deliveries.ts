import type { FastifyInstance } from 'fastify';
import {
  CHANNELS,
  parseTimestamp,
  RECORD_FIELD_NAMES,
  resendDelivery,
  type RecordFieldName,
  type Suppression,
} from '@ens/core';
import {
  loadDelivery,
  searchDeliveries,
  SearchTooSlow,
  type DeliveryDetail,
  type DeliveryFilters,
  type DeliveryListRow,
  type SearchTotal,
} from '@ens/core/internal';
import { STATUSES } from '../queries/summary.ts';
import { newSubmissionId } from '../form-submissions.ts';
import {
  actorOf,
  formValue,
  pageContext,
  queryValue,
  redirectWithFlash,
  sendPage,
  type ConsoleDeps,
} from '../request-context.ts';
import { messageContent } from '../views/message-content.ts';
import { clientNames } from '../queries/clients.ts';
import {
  isInternal,
  loadInternalTraffic,
  type InternalTraffic,
} from '../queries/internal-client.ts';
import {
  clamp,
  clientLink,
  clip,
  field,
  orDash,
  pager,
  query,
  reasonBadge,
  scrollable,
  selectField,
  shortId,
  stacked,
  statusBadge,
  time,
  totalLine,
} from '../views/components.ts';
import { REASON_LABELS } from '../views/consent-panels.ts';
import { html, type Html } from '../views/html.ts';
import { consolePage, csrfField, type PageContext } from '../views/layout.ts';

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const TEXT_FILTERS = [
  { name: 'reference', label: 'Reference' },
  { name: 'recipient', label: 'Recipient' },
  { name: 'tenant', label: 'Tenant' },
  { name: 'client', label: 'Client' },
  { name: 'event_type', label: 'Event type' },
] as const;

type FilterName =
  | 'reference'
  | 'recipient'
  | 'tenant'
  | 'client'
  | 'channel'
  | 'status'
  | 'event_type'
  | 'since'
  | 'until';
type Raw = Record<FilterName | 'after', string>;

/**
 * A time as typed: ISO 8601 with an offset, or a datetime-local value (no offset), taken as UTC.
 * Returns the ISO string, or null when it is not a time.
 */
export function parseTime(v: string): string | null {
  return parseTimestamp(v, { form: 'typed' });
}

function validate(raw: Raw): {
  filters: DeliveryFilters;
  errors: Partial<Record<FilterName | 'after', string>>;
} {
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
    else
      errors[k] =
        'Not a time: use 2025-01-31T14:00 (UTC) or ISO 8601 with an offset, a real day and time.';
  }
  if (filters.since && filters.until && filters.since >= filters.until)
    errors.until = 'Must be after "Since".';
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

/** The search's total, bounded: "1,204 deliveries match", "More than 10,000 …", or nothing. */
function countLine(total: SearchTotal | null): Html {
  if (!total) return html``;
  const n = total.n.toLocaleString('en');
  const noun = total.n === 1 && !total.atLeast ? 'delivery matches' : 'deliveries match';
  return html`<p class="count-line" id="delivery-count">${total.atLeast ? `More than ${n}` : n} ${noun}.</p>`;
}

function resultsTable(
  rows: DeliveryListRow[],
  names: Map<string, string>,
  internal: InternalTraffic,
): Html {
  return scrollable(
    'Deliveries',
    html`<table id="deliveries">
<caption>Deliveries, newest first</caption>
<thead><tr><th scope="col">Delivery</th><th scope="col">Created</th><th scope="col">Status</th><th scope="col">Recipient <span class="sub-h">/ channel</span></th><th scope="col">Client <span class="sub-h">/ tenant</span></th><th scope="col">Event type <span class="sub-h">/ reference</span></th><th scope="col" class="num">Attempts</th><th scope="col">Last error</th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="8" class="muted">No delivery matches.</td></tr>` : ''}
${rows.map(
  (r) => html`<tr data-delivery-id="${r.id}">
<td><a href="/ops/deliveries/${r.id}">${shortId(r.id)}</a></td><td>${time(r.created_at)}</td><td>${statusBadge(r.status)}</td>
<td>${stacked(clip(r.recipient), r.channel)}</td>
<td>${stacked(clientLink(r.client_id, names.get(r.client_id), isInternal(internal, r.client_id, r.tenant)), clip(r.tenant))}</td>
<td>${stacked(clip(r.event_type), clip(r.reference))}</td><td class="num">${r.attempts}</td><td class="error-text">${clamp(r.last_error)}</td></tr>`,
)}
</tbody>
</table>`,
  );
}

/**
 * A callback's posts: the last one in a line, all of them (however many) behind a disclosure, so a
 * row stays short.
 */
function callbackAttempts(list: Record<string, unknown>[]): Html {
  const last = list[list.length - 1]!;
  const said = (a: Record<string, unknown>) =>
    html`${a.http_status !== null ? html`HTTP ${a.http_status}` : ''}${a.error ? html` <span class="error-text">${a.error}</span>` : ''}`;
  return html`<details class="attempts"><summary>${list.length} ${list.length === 1 ? 'post' : 'posts'}, last ${time(last.at as string, { ms: true })}</summary>
<ol class="attempt-list">${list.map((a) => html`<li>#${a.number} ${time(a.at as string, { ms: true })}: ${said(a)}</li>`)}</ol></details>`;
}

/** The provider and mail reports that feed the suppression list, as delivery_events kinds. */
const SUPPRESSION_EVENT_KINDS = ['hard_bounce', 'soft_bounce', 'complaint'];

/**
 * A delivery's bounces and complaints, and the suppression list entries its recipient has in its
 * tenant now.
 */
function consentSection(
  x: Record<string, string | number | null>,
  events: Record<string, unknown>[],
  entries: Suppression[],
): Html {
  const reports = events.filter((e) => SUPPRESSION_EVENT_KINDS.includes(String(e.kind)));
  const ms = (v: unknown) => time(v as string | null, { ms: true });
  const listHref = `/ops/suppressions${query({ client: String(x.client_id), tenant: String(x.tenant), channel: String(x.channel), address: String(x.recipient) })}`;
  return html`<section id="consent" aria-labelledby="consent-h">
<h2 id="consent-h">Bounces and complaints</h2>
${scrollable(
  'Bounces and complaints',
  html`<table id="suppression-events">
<caption>Bounce and complaint reports about this delivery (provider reports and report mail)</caption>
<thead><tr><th scope="col">Kind</th><th scope="col">Occurred</th><th scope="col">Received</th><th scope="col">Detail</th></tr></thead>
<tbody>
${reports.length === 0 ? html`<tr><td colspan="4" class="muted">No bounce or complaint reported.</td></tr>` : ''}
${reports.map((e) => html`<tr data-kind="${String(e.kind)}"><td>${reasonBadge(String(e.kind), REASON_LABELS[e.kind as 'hard_bounce'] ?? String(e.kind))}</td><td>${ms(e.occurred_at)}</td><td>${ms(e.received_at)}</td><td>${clamp(e.detail as string | null)}</td></tr>`)}
</tbody>
</table>`,
)}
${scrollable(
  'Suppression list entries for this recipient',
  html`<table id="recipient-suppressions">
<caption>The recipient's entries in this tenant's suppression list now</caption>
<thead><tr><th scope="col">Scope</th><th scope="col">Reason <span class="sub-h">/ source</span></th><th scope="col">Evidence</th><th scope="col">Created</th><th scope="col">Expires</th></tr></thead>
<tbody>
${entries.length === 0 ? html`<tr><td colspan="5" class="muted">None: sends to this recipient are not suppressed.</td></tr>` : ''}
${entries.map((s) => html`<tr data-scope="${s.scope}" data-reason="${s.reason}"><td>${s.scope === '*' ? 'every event type' : clip(s.scope)}</td><td>${stacked(reasonBadge(s.reason, REASON_LABELS[s.reason]), s.source)}</td><td>${clamp(s.detail)}${s.delivery_id && s.delivery_id !== x.id ? html`<a class="sub-link" href="/ops/deliveries/${s.delivery_id}">from delivery ${shortId(s.delivery_id)}</a>` : ''}</td><td>${time(s.created_at)}</td><td>${!s.expires_at ? 'never' : Date.parse(s.expires_at) <= Date.now() ? html`lapsed ${time(s.expires_at)}` : time(s.expires_at)}</td></tr>`)}
</tbody>
</table>`,
)}
<p><a href="${listHref}">This recipient in the suppression list</a></p>
</section>`;
}

/** The record's fields the delivery page shows in a place of its own (the id is its heading). */
const PLACED = new Set<RecordFieldName>([
  'delivery_id',
  'status',
  'channel',
  'recipient',
  'tenant',
  'event_type',
  'reference',
  'provider_message_id',
  'attempts',
  'created_at',
  'sent_at',
  'delivered_at',
  'read_at',
  'bounced_at',
  'complained_at',
  'updated_at',
  'last_error',
]);

function detailPage(
  d: DeliveryDetail,
  ctx: PageContext,
  clientName: string | undefined,
  internal: boolean,
  entries: Suppression[],
): Html {
  const x = d.delivery as Record<string, string | number | null>;
  const ms = (v: unknown) => time(v as string | null, { ms: true });
  const facts: [string, Html][] = [
    ['Status', statusBadge(String(x.status))],
    ['Channel', html`${x.channel}`],
    ['Recipient', html`${x.recipient}`],
    ['Client', clientLink(String(x.client_id), clientName, internal)],
    ['Tenant', html`${x.tenant}`],
    ['Event type', html`${x.event_type}`],
    ['Reference', orDash(x.reference)],
    ['Handoff', html`<code>${x.handoff_id}</code>`],
    ['Provider', orDash(x.provider)],
    ['Provider message id', orDash(x.provider_message_id)],
    ['Attempts', html`${x.attempts}`],
    ['Accepted (handoff)', ms(x.handoff_created_at)],
    ['Created', ms(x.created_at)],
    ['Sent', ms(x.sent_at)],
    ['Delivered', ms(x.delivered_at)],
    ['Read', ms(x.read_at)],
    ...(x.bounced_at
      ? [
          ['Bounced', html`<strong class="error-text">${ms(x.bounced_at)}</strong>`] as [
            string,
            Html,
          ],
        ]
      : []),
    ...(x.complained_at
      ? [
          [
            'Complained (marked as spam)',
            html`<strong class="error-text">${ms(x.complained_at)}</strong>`,
          ] as [string, Html],
        ]
      : []),
    ['Last change (feed)', ms(x.updated_at)],
    [
      'Next attempt',
      x.status === 'pending' ? ms(x.next_attempt_at) : html`<span class="muted">—</span>`,
    ],
    ['Last error', orDash(x.last_error)],
    ['Callback URL', orDash(x.callback_url)],
    // A field added to the record is shown as it is until the page gives it a place of its own.
    ...RECORD_FIELD_NAMES.filter((n) => !PLACED.has(n)).map((n): [string, Html] => [
      n,
      orDash(x[n]),
    ]),
  ];
  const resend =
    x.status === 'pending'
      ? html`<p class="muted">Resend becomes available once this delivery has ended.</p>`
      : html`<form method="post" action="/ops/deliveries/${x.id}/resend" class="inline">
${csrfField(ctx.csrf)}<input type="hidden" name="submission" value="${newSubmissionId()}">
<button type="submit" class="button">Resend as a new delivery</button>
</form>
<p class="muted">Sends the same content to the same recipient as a new delivery of the same client, tenant, event type and reference, through the normal accept path (quotas apply). This delivery keeps its outcome; no callback is posted for the new one. The action is in the audit log.</p>`;
  return html`<h1>Delivery <code>${x.id}</code></h1>
<p><a href="/ops/deliveries${query({ client: String(x.client_id), tenant: String(x.tenant) })}">Other deliveries of this tenant</a>${x.reference ? html` · <a href="/ops/deliveries${query({ client: String(x.client_id), reference: String(x.reference) })}">Deliveries with this reference</a>` : ''}</p>
<dl class="facts">${facts.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>

<section id="resend" aria-labelledby="resend-h" class="card">
<h2 id="resend-h">Resend</h2>
${resend}
</section>

<section aria-labelledby="content-h">
<h2 id="content-h">Message content</h2>
<p class="muted">As stored at accept time. Images and values that may be secrets are not shown.</p>
${messageContent(String(x.event_type), d.content)}
</section>

<h2>Attempts</h2>
${scrollable(
  'Send attempts',
  html`<table id="attempts">
<caption>Send attempts to providers (times in UTC, to the millisecond)</caption>
<thead><tr><th scope="col" class="num">#</th><th scope="col">Provider</th><th scope="col">Outcome</th><th scope="col">Error</th><th scope="col">Provider message id</th><th scope="col">Started</th><th scope="col">Finished</th></tr></thead>
<tbody>
${d.attempts.length === 0 ? html`<tr><td colspan="7" class="muted">No attempt yet.</td></tr>` : ''}
${d.attempts.map((a) => html`<tr><td class="num">${a.number}</td><td><code>${a.provider}</code></td><td>${a.outcome ? statusBadge(String(a.outcome)) : html`<span class="muted">in flight</span>`}</td><td class="error-text">${clamp(a.error as string | null)}</td><td>${clip(a.provider_message_id as string | null)}</td><td>${ms(a.started_at)}</td><td>${ms(a.finished_at)}</td></tr>`)}
</tbody>
</table>`,
)}

<h2>Provider updates</h2>
${scrollable(
  'Provider updates',
  html`<table id="events">
<caption>Status reports from the provider (webhooks)</caption>
<thead><tr><th scope="col">Kind</th><th scope="col">Occurred</th><th scope="col">Received</th><th scope="col">Detail</th></tr></thead>
<tbody>
${d.events.length === 0 ? html`<tr><td colspan="4" class="muted">No report from the provider.</td></tr>` : ''}
${d.events.map((e) => html`<tr><td>${statusBadge(String(e.kind))}</td><td>${ms(e.occurred_at)}</td><td>${ms(e.received_at)}</td><td>${clamp(e.detail as string | null)}</td></tr>`)}
</tbody>
</table>`,
)}

${consentSection(x, d.events, entries)}

<h2>Callbacks</h2>
${scrollable(
  'Callbacks',
  html`<table id="callbacks">
<caption>Callback posts to the client</caption>
<thead><tr><th scope="col">Callback</th><th scope="col">URL</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last error</th><th scope="col">Created</th></tr></thead>
<tbody>
${d.callbacks.length === 0 ? html`<tr><td colspan="6" class="muted">No callback (none asked for, or the delivery has not ended).</td></tr>` : ''}
${d.callbacks.map(
  (
    c,
  ) => html`<tr data-callback-id="${c.id}"><td>${shortId(String(c.id))}</td><td>${clamp(String(c.url), 'url')}</td><td>${statusBadge(String(c.status))}</td>
<td>${c.attempts_list.length === 0 ? html`<span class="muted">none yet</span>` : callbackAttempts(c.attempts_list)}</td>
<td class="error-text">${clamp(c.last_error as string | null)}</td><td>${ms(c.created_at)}</td></tr>`,
)}
</tbody>
</table>`,
)}

<section id="handoff" aria-labelledby="handoff-h">
<h2 id="handoff-h">Other deliveries of this handoff</h2>
${d.siblings.length > 0 ? totalLine({ id: 'handoff-count', total: d.siblingsTotal, shown: d.siblings.length, one: 'other delivery', many: 'other deliveries' }) : ''}
${scrollable(
  'Other deliveries of this handoff',
  html`<table id="handoff-deliveries">
<caption>Handoff <code>${x.handoff_id}</code>: its other deliveries${d.siblingsMore ? ` (the first ${d.siblings.length})` : ''}</caption>
<thead><tr><th scope="col">Delivery</th><th scope="col">Channel</th><th scope="col">Recipient</th><th scope="col">Status</th><th scope="col" class="num">Attempts</th><th scope="col">Last error</th></tr></thead>
<tbody>
${d.siblings.length === 0 ? html`<tr><td colspan="6" class="muted">This delivery is the handoff's only one.</td></tr>` : ''}
${d.siblings.map((o) => html`<tr data-delivery-id="${o.id}"><td><a href="/ops/deliveries/${o.id}">${shortId(o.id)}</a></td><td>${o.channel}</td><td>${clip(o.recipient)}</td><td>${statusBadge(o.status)}</td><td class="num">${o.attempts}</td><td class="error-text">${clamp(o.last_error)}</td></tr>`)}
</tbody>
</table>`,
)}
</section>`;
}

export function deliveryRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get('/deliveries', async (req, reply) => {
    const q = req.query;
    const raw = Object.fromEntries(
      (
        [
          'reference',
          'recipient',
          'tenant',
          'client',
          'channel',
          'status',
          'event_type',
          'since',
          'until',
          'after',
        ] as const
      ).map((k) => [k, queryValue(q, k)]),
    ) as Raw;
    const { filters, errors } = validate(raw);
    const ctx = pageContext(req, reply, deps, 'deliveries');
    const head = html`<h1>Deliveries</h1>${filterForm(raw, errors)}`;
    if (Object.keys(errors).length > 0) {
      const msg = errors.after
        ? html`<p class="error-summary" role="alert">${errors.after}</p>`
        : html`<p class="error-summary" role="alert">Fix the marked fields to search.</p>`;
      return sendPage(reply, 400, consolePage(ctx, 'Deliveries', html`${head}${msg}`));
    }
    try {
      const { rows, next, total } = await searchDeliveries(deps.rt.db, filters);
      const [names, internal] = await Promise.all([
        clientNames(
          deps.rt.db,
          rows.map((r) => r.client_id),
        ),
        loadInternalTraffic(deps.rt.db),
      ]);
      const { after: _after, ...keep } = raw;
      return sendPage(
        reply,
        200,
        consolePage(
          ctx,
          'Deliveries',
          html`${head}${countLine(total)}${resultsTable(rows, names, internal)}${pager(next, (a) => `/ops/deliveries${query({ ...keep, after: a })}`)}`,
        ),
      );
    } catch (e) {
      if (!(e instanceof SearchTooSlow)) throw e;
      return sendPage(
        reply,
        400,
        consolePage(
          ctx,
          'Deliveries',
          html`${head}<p class="error-summary" role="alert">This search took too long. Narrow it with a time range (Since, Until), a client or a tenant.</p>`,
        ),
      );
    }
  });

  app.get<{ Params: { id: string } }>('/deliveries/:id', async (req, reply) => {
    const ctx = pageContext(req, reply, deps, 'deliveries');
    const d = UUID.test(req.params.id) ? await loadDelivery(deps.rt.db, req.params.id) : null;
    if (!d)
      return sendPage(
        reply,
        404,
        consolePage(
          ctx,
          'Delivery not found',
          html`<h1>Delivery not found</h1><p>No delivery has the id <code>${req.params.id}</code>.</p><p><a href="/ops/deliveries">Search deliveries</a></p>`,
        ),
      );
    const clientId = String(d.delivery.client_id);
    const x = d.delivery as Record<string, string>;
    const [names, internal, entries] = await Promise.all([
      clientNames(deps.rt.db, [clientId]),
      loadInternalTraffic(deps.rt.db),
      deps.rt.suppressions.list(clientId, x.tenant!, {
        channel: x.channel as Suppression['channel'],
        address: x.recipient!,
        limit: 100,
      }),
    ]);
    return sendPage(
      reply,
      200,
      consolePage(
        ctx,
        `Delivery ${req.params.id}`,
        detailPage(
          d,
          ctx,
          names.get(clientId),
          isInternal(internal, clientId, String(d.delivery.tenant)),
          entries.results,
        ),
      ),
    );
  });

  app.post<{ Params: { id: string } }>(
    '/deliveries/:id/resend',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const back = `/ops/deliveries/${encodeURIComponent(req.params.id)}`;
      if (!UUID.test(req.params.id))
        return redirectWithFlash(reply, deps, '/ops/deliveries', 'No such delivery.');
      const submission = formValue(req.body, 'submission');
      if (!/^[A-Za-z0-9_-]{22}$/.test(submission))
        return redirectWithFlash(
          reply,
          deps,
          back,
          'The form is damaged: reload the page and try again. Nothing was sent.',
        );
      const r = await resendDelivery(deps.rt, req.params.id, submission);
      if (!r.ok) return redirectWithFlash(reply, deps, back, `Not resent: ${r.detail}`);
      if (!r.replayed) {
        await deps.audit.write({
          ...actorOf(req),
          action: 'delivery.resend',
          target: req.params.id,
          detail: { new_delivery_id: r.deliveryId, handoff_id: r.handoffId },
        });
      }
      return redirectWithFlash(
        reply,
        deps,
        `/ops/deliveries/${r.deliveryId}`,
        r.replayed
          ? 'That resend was already made (the form was sent twice): this is the delivery it ' +
              'created.'
          : `Resent as this new delivery, from ${req.params.id}.`,
      );
    },
  );
}
