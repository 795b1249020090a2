import { html, raw, type Html } from './html.ts';

export function statusBadge(status: string | null | undefined): Html {
  if (!status) return html`<span class="muted">—</span>`;
  return html`<span class="badge status-${status.replace(/[^a-z_]/g, '')}">${status}</span>`;
}

/**
 * ISO timestamps shown in UTC, with the full value in a machine-readable <time> that never wraps.
 * To the second in lists; to the millisecond where the order of events matters (a delivery's page).
 */
export function time(iso: string | null | undefined, opts: { ms?: boolean } = {}): Html {
  if (!iso) return html`<span class="muted">—</span>`;
  const fraction = /\.(\d+)/.exec(iso)?.[1] ?? '';
  const base = iso
    .replace('T', ' ')
    .replace(/\.\d+/, '')
    .replace(/\+00:00$|Z$/, '');
  const shown = opts.ms ? `${base}.${fraction.padEnd(3, '0').slice(0, 3)} UTC` : `${base} UTC`;
  return html`<time datetime="${iso}">${shown}</time>`;
}

/**
 * An id in a table: UUIDv7s share their leading (time) digits, so the last eight are shown, and
 * the whole id is there for screen readers, search and copy (visually hidden).
 */
export function shortId(id: string): Html {
  if (id.length <= 12) return html`<code class="id">${id}</code>`;
  return html`<code class="id" title="${id}"><span aria-hidden="true">…${id.slice(-8)}</span><span class="visually-hidden">${id}</span></code>`;
}

/**
 * Text that may be long (recipients, references, event types) on one line, cut with an ellipsis;
 * the whole text in the title.
 */
export function clip(v: string | null | undefined): Html {
  if (v === null || v === undefined || v === '') return html`<span class="muted">—</span>`;
  return html`<span class="clip" title="${v}">${v}</span>`;
}

/**
 * Long free text (errors, URLs) on at most two lines; the whole text in the title and on the detail
 * page.
 */
export function clamp(v: string | null | undefined, cls = ''): Html {
  if (v === null || v === undefined || v === '') return html`<span class="muted">—</span>`;
  return html`<span class="clamp${cls ? ` ${cls}` : ''}" title="${v}">${v}</span>`;
}

/**
 * A cell of two lines: the main value and a muted second one (a client and its tenant, a recipient
 * and its channel).
 */
export function stacked(main: Html | string, sub: Html | string): Html {
  return html`<span class="stack">${main}<span class="sub">${sub}</span></span>`;
}

/**
 * Every table sits in a region that scrolls sideways on its own when the window is narrower than
 * the table, so the page itself never does; the region is focusable so keyboard users can scroll
 * it.
 */
export function scrollable(label: string, table: Html): Html {
  return html`<div class="table-scroll" role="region" aria-label="${label}" tabindex="0">${table}</div>`;
}

export function orDash(v: unknown): Html {
  return v === null || v === undefined || v === ''
    ? html`<span class="muted">—</span>`
    : html`${String(v)}`;
}

export function pager(next: string | null, href: (after: string) => string): Html {
  return next
    ? html`<p class="pager"><a class="button secondary" rel="next" href="${href(next)}">Next page</a></p>`
    : html``;
}

/**
 * A list's total: exact, or counted up to a bound and `atLeast` past it, so a list of millions is
 * not counted on every page view (the deliveries search, the audit log and the suppression lists
 * count that way).
 */
export interface ListTotal {
  n: number;
  atLeast: boolean;
}

/**
 * The line over a list that says how many it has: "12 rules.", "Showing 50 of 1,234 rules.", or
 * "Showing 50 of more than 10,000 firings." when the count stopped at its bound.
 */
export function totalLine(o: {
  id: string;
  total: ListTotal;
  shown: number;
  one: string;
  many: string;
}): Html {
  const n = o.total.n.toLocaleString('en');
  const noun = o.total.n === 1 && !o.total.atLeast ? o.one : o.many;
  const said =
    o.total.atLeast || o.shown < o.total.n
      ? `Showing ${o.shown.toLocaleString('en')} of ${o.total.atLeast ? `more than ${n}` : n} ${noun}.`
      : `${n} ${noun}.`;
  return html`<p class="count-line" id="${o.id}">${said}</p>`;
}

/** Builds a query string from the non-empty values. */
export function query(params: Record<string, string | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

export interface FieldOptions {
  name: string;
  label: string;
  value?: string;
  type?: string;
  error?: string;
  hint?: string;
  required?: boolean;
  attrs?: Html;
}

/** A labelled input; a field error is tied to it with aria-describedby and aria-invalid. */
export function field(o: FieldOptions): Html {
  const id = `f-${o.name.replace(/[^a-z0-9_-]/gi, '-')}`;
  const described = [o.hint ? `${id}-hint` : '', o.error ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return html`<div class="field${o.error ? ' has-error' : ''}">
<label for="${id}">${o.label}</label>
${o.hint ? html`<span class="hint" id="${id}-hint">${o.hint}</span>` : ''}
${o.error ? html`<span class="error" id="${id}-error">${o.error}</span>` : ''}
<input id="${id}" name="${o.name}" type="${o.type ?? 'text'}" value="${o.value ?? ''}"${o.required ? raw(' required') : ''}${described ? html` aria-describedby="${described}"` : ''}${o.error ? raw(' aria-invalid="true"') : ''}${o.attrs ?? ''}>
</div>`;
}

export function selectField(o: {
  name: string;
  label: string;
  value?: string;
  options: { value: string; label: string }[];
  error?: string;
}): Html {
  const id = `f-${o.name}`;
  return html`<div class="field${o.error ? ' has-error' : ''}">
<label for="${id}">${o.label}</label>
${o.error ? html`<span class="error" id="${id}-error">${o.error}</span>` : ''}
<select id="${id}" name="${o.name}"${o.error ? html` aria-describedby="${id}-error" aria-invalid="true"` : ''}>
${o.options.map((op) => html`<option value="${op.value}"${op.value === (o.value ?? '') ? raw(' selected') : ''}>${op.label}</option>`)}
</select>
</div>`;
}

/** A one-button form posting to a console action. */
export function actionButton(
  action: string,
  label: string,
  csrf: string,
  opts: { danger?: boolean; secondary?: boolean; hidden?: Record<string, string> } = {},
): Html {
  return html`<form method="post" action="${action}" class="inline">
<input type="hidden" name="_csrf" value="${csrf}">
${Object.entries(opts.hidden ?? {}).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<button type="submit" class="button${opts.danger ? ' danger' : opts.secondary ? ' secondary' : ''}">${label}</button>
</form>`;
}

export function percent(v: number | null | undefined): string {
  return v === null || v === undefined ? '—' : `${v.toFixed(v % 1 === 0 ? 0 : 2)}%`;
}

const UNITS: [number, string][] = [
  [86_400, 'd'],
  [3_600, 'h'],
  [60, 'min'],
  [1, 's'],
];

/**
 * Seconds as a person reads them: "3 s", "4 min 12 s", "2 h 5 min", "3 d 1 h". Two units at most,
 * rounded down, because an operator wants the order of magnitude, not the last second.
 */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const i = UNITS.findIndex(([size]) => s >= size);
  if (i === -1) return '0 s';
  const [size, unit] = UNITS[i]!;
  const first = `${Math.floor(s / size)} ${unit}`;
  const next = UNITS[i + 1];
  const rest = next ? Math.floor((s % size) / next[0]) : 0;
  return rest > 0 ? `${first} ${rest} ${next![1]}` : first;
}

/**
 * A client by name (its id in the link and the title), with ENS's own alert client labelled as
 * such.
 */
export function clientLink(id: string, name: string | undefined, internal = false): Html {
  return html`<a href="/ops/clients/${encodeURIComponent(id)}" class="clip" title="${id}">${name ?? id}</a>${internal ? html` <span class="badge internal">ENS internal</span>` : ''}`;
}

/** A labelled text area (a note, a reason), tied to its hint and error like field(). */
export function textareaField(o: {
  name: string;
  label: string;
  value?: string;
  error?: string;
  hint?: string;
  required?: boolean;
  rows?: number;
  maxLength?: number;
}): Html {
  const id = `f-${o.name.replace(/[^a-z0-9_-]/gi, '-')}`;
  const described = [o.hint ? `${id}-hint` : '', o.error ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return html`<div class="field wide${o.error ? ' has-error' : ''}">
<label for="${id}">${o.label}</label>
${o.hint ? html`<span class="hint" id="${id}-hint">${o.hint}</span>` : ''}
${o.error ? html`<span class="error" id="${id}-error">${o.error}</span>` : ''}
<textarea id="${id}" name="${o.name}" rows="${o.rows ?? 3}"${o.maxLength ? html` maxlength="${o.maxLength}"` : ''}${o.required ? raw(' required') : ''}${described ? html` aria-describedby="${described}"` : ''}${o.error ? raw(' aria-invalid="true"') : ''}>${o.value ?? ''}</textarea>
</div>`;
}

/**
 * A group of checkboxes under one legend, each with its own label. Each box is its own field,
 * `<name>_<value>` (a repeated field name would keep only its last value in a form body).
 */
export function checkboxGroup(o: {
  name: string;
  legend: string;
  options: { value: string; label: string }[];
  checked: readonly string[];
  hint?: string;
  error?: string;
}): Html {
  const id = `f-${o.name}`;
  const described = [o.hint ? `${id}-hint` : '', o.error ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return html`<fieldset class="checks${o.error ? ' has-error' : ''}"${described ? html` aria-describedby="${described}"` : ''}>
<legend>${o.legend}</legend>
${o.hint ? html`<p class="hint" id="${id}-hint">${o.hint}</p>` : ''}
${o.error ? html`<p class="error" id="${id}-error">${o.error}</p>` : ''}
${o.options.map((op) => html`<div class="field checkbox"><input id="${id}-${op.value}" name="${o.name}_${op.value}" type="checkbox" value="on"${o.checked.includes(op.value) ? raw(' checked') : ''}> <label for="${id}-${op.value}">${op.label}</label></div>`)}
</fieldset>`;
}

/** A suppression reason as a coloured badge, said in words. */
export function reasonBadge(reason: string, label: string): Html {
  return html`<span class="badge reason-badge reason-${reason.replace(/[^a-z_]/g, '')}">${label}</span>`;
}
