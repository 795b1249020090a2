import type { FastifyInstance } from 'fastify';
import { parseTimestamp } from '@ens/core';
import { clientNames } from '../queries/clients.ts';
import { pageContext, queryValue, sendPage, type ConsoleDeps } from '../request-context.ts';
import type { AuditFilter, AuditRow } from '../staff/audit-log.ts';
import {
  clamp,
  field,
  orDash,
  pager,
  query,
  scrollable,
  selectField,
  time,
} from '../views/components.ts';
import { html, type Html } from '../views/html.ts';
import { consolePage } from '../views/layout.ts';

const PAGE = 50;
const FILTERS = ['actor', 'action', 'since', 'until'] as const;
type Raw = Record<(typeof FILTERS)[number], string>;

/**
 * A detail value in words: nested objects as "key value" pairs, lists joined, null as "default".
 */
function words(v: unknown): string {
  if (v === null || v === undefined) return 'default';
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.map(words).join(', ');
  if (typeof v === 'object')
    return Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${k.replace(/_/g, ' ')} ${words(x)}`)
      .join(', ');
  return String(v);
}

/** The detail object in words ("rate limit 50 · daily quota sms 1000"), clamped, not its JSON. */
function detailText(detail: Record<string, unknown>): Html {
  const entries = Object.entries(detail);
  if (entries.length === 0) return html`<span class="muted">—</span>`;
  return clamp(
    entries.map(([k, v]) => `${k.replace(/_/g, ' ')} ${words(v)}`).join(' · '),
    'detail',
  );
}

/**
 * A target by name where it names a client (alone, or as client/tenant), with its id kept beside
 * it; other targets (a dead letter, a rule, a staff member) as their id.
 */
function target(t: string | null, names: Map<string, string>): Html {
  if (!t) return orDash(null);
  const [first, ...rest] = t.split('/');
  const name = names.get(first!);
  if (!name) return html`<span class="clip target" title="${t}">${t}</span>`;
  const tail = rest.length > 0 ? html` / ${rest.join('/')}` : '';
  return html`<a class="clip" href="/ops/clients/${encodeURIComponent(first!)}" title="${t}">${name}</a>${tail}<span class="sub"><code class="id">${t}</code></span>`;
}

function validate(raw: Raw): { filter: AuditFilter; errors: Partial<Raw> } {
  const filter: AuditFilter = {};
  const errors: Partial<Raw> = {};
  if (raw.actor) filter.actor = raw.actor;
  if (raw.action) filter.action = raw.action;
  for (const k of ['since', 'until'] as const) {
    if (!raw[k]) continue;
    const at = parseTimestamp(raw[k], { form: 'typed' });
    if (at) filter[k] = at;
    else errors[k] = 'Not a time: use 2025-01-31T14:00 (UTC) or ISO 8601 with an offset.';
  }
  if (filter.since && filter.until && filter.since >= filter.until)
    errors.until = 'Must be after "Since".';
  return { filter, errors };
}

function filterForm(raw: Raw, errors: Partial<Raw>, actions: string[]): Html {
  return html`<form method="get" action="/ops/audit" class="filters" role="search" aria-label="Filter the audit log">
${field({ name: 'actor', label: 'Who', value: raw.actor, error: errors.actor, hint: 'an email, or cli' })}
${selectField({ name: 'action', label: 'Action', value: raw.action, error: errors.action, options: [{ value: '', label: 'Any' }, ...actions.map((a) => ({ value: a, label: a }))] })}
${field({ name: 'since', label: 'Since', value: raw.since, error: errors.since, hint: 'UTC, e.g. 2025-01-31T14:00' })}
${field({ name: 'until', label: 'Until', value: raw.until, error: errors.until, hint: 'UTC, exclusive' })}
<div class="actions"><button type="submit" class="button">Filter</button> <a href="/ops/audit" class="button secondary">Clear</a></div>
</form>`;
}

function table(page: AuditRow[], names: Map<string, string>): Html {
  return scrollable(
    'Audit log',
    html`<table id="audit">
<caption>Staff actions</caption>
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Detail</th></tr></thead>
<tbody>
${page.length === 0 ? html`<tr><td colspan="5" class="muted">Nothing matches.</td></tr>` : ''}
${page.map(
  (r) =>
    html`<tr data-audit-id="${r.id}" data-action="${r.action}" data-actor="${r.actor}"><td>${time(r.at)}</td><td><span class="clip" title="${r.actor}">${r.actor}</span></td><td><code>${r.action}</code></td><td>${target(r.target, names)}</td>
<td>${detailText(r.detail)}</td></tr>`,
)}
</tbody>
</table>`,
  );
}

export function auditRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get('/audit', async (req, reply) => {
    const raw = Object.fromEntries(FILTERS.map((k) => [k, queryValue(req.query, k)])) as Raw;
    const { filter, errors } = validate(raw);
    const ctx = pageContext(req, reply, deps, 'audit');
    const actions = await deps.audit.actions();
    const intro = html`<h1>Audit log</h1>
<p>Every action taken in the console or with <code>ens staff</code> and <code>ens clients</code> (actor <code>cli</code>), newest first; reads are not logged.</p>
${filterForm(raw, errors, actions)}`;
    if (Object.keys(errors).length > 0)
      return sendPage(
        reply,
        400,
        consolePage(
          ctx,
          'Audit log',
          html`${intro}<p class="error-summary" role="alert">Fix the marked fields to filter.</p>`,
        ),
      );
    const before = queryValue(req.query, 'before');
    const [rows, count] = await Promise.all([
      deps.audit.page({
        ...filter,
        before: /^\d{1,18}$/.test(before) ? before : undefined,
        limit: PAGE + 1,
      }),
      deps.audit.count(filter),
    ]);
    const page = rows.slice(0, PAGE);
    const next = rows.length > PAGE ? page[page.length - 1]!.id : null;
    const names = await clientNames(
      deps.rt.db,
      page.flatMap((r) => (r.target ? [r.target.split('/')[0]!] : [])),
    );
    const total = html`<p class="count-line" id="audit-count">${count.atLeast ? 'More than ' : ''}${count.n.toLocaleString('en')} ${count.n === 1 ? 'entry' : 'entries'}${Object.keys(filter).length > 0 ? ' match the filter' : ''}.</p>`;
    return sendPage(
      reply,
      200,
      consolePage(
        ctx,
        'Audit log',
        html`${intro}${total}${table(page, names)}
${pager(next, (a) => `/ops/audit${query({ ...raw, before: a })}`)}`,
      ),
    );
  });
}
