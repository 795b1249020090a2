import { CHANNELS } from '@ens/core';
import { html, raw, type Html } from './html.ts';

export function statusBadge(status: string | null | undefined): Html {
  if (!status) return html`<span class="muted">—</span>`;
  return html`<span class="badge status-${status.replace(/[^a-z_]/g, '')}">${status}</span>`;
}

/** ISO timestamps shown to the second, in UTC, with the full value in a machine-readable <time>. */
export function time(iso: string | null | undefined): Html {
  if (!iso) return html`<span class="muted">—</span>`;
  const shown = iso.replace('T', ' ').replace(/\.\d+/, '').replace(/\+00:00$|Z$/, ' UTC');
  return html`<time datetime="${iso}">${shown}</time>`;
}

export function orDash(v: unknown): Html {
  return v === null || v === undefined || v === '' ? html`<span class="muted">—</span>` : html`${String(v)}`;
}

export function pager(next: string | null, href: (after: string) => string): Html {
  return next ? html`<p class="pager"><a class="button secondary" rel="next" href="${href(next)}">Next page</a></p>` : html``;
}

/** Builds a query string from the non-empty values. */
export function query(params: Record<string, string | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
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
  const described = [o.hint ? `${id}-hint` : '', o.error ? `${id}-error` : ''].filter(Boolean).join(' ');
  return html`<div class="field${o.error ? ' has-error' : ''}">
<label for="${id}">${o.label}</label>
${o.hint ? html`<span class="hint" id="${id}-hint">${o.hint}</span>` : ''}
${o.error ? html`<span class="error" id="${id}-error">${o.error}</span>` : ''}
<input id="${id}" name="${o.name}" type="${o.type ?? 'text'}" value="${o.value ?? ''}"${o.required ? raw(' required') : ''}${described ? html` aria-describedby="${described}"` : ''}${o.error ? raw(' aria-invalid="true"') : ''}${o.attrs ?? ''}>
</div>`;
}

export function selectField(o: { name: string; label: string; value?: string; options: { value: string; label: string }[]; error?: string }): Html {
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
export function actionButton(action: string, label: string, csrf: string, opts: { danger?: boolean; hidden?: Record<string, string> } = {}): Html {
  return html`<form method="post" action="${action}" class="inline">
<input type="hidden" name="_csrf" value="${csrf}">
${Object.entries(opts.hidden ?? {}).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<button type="submit" class="button${opts.danger ? ' danger' : ''}">${label}</button>
</form>`;
}

const STATUS_ORDER = ['sent', 'pending', 'failed'] as const;
const BAR_CLASS: Record<string, string> = { sent: 'bar-sent', pending: 'bar-pending', failed: 'bar-failed' };

/**
 * Horizontal stacked bars per channel (sent, pending, failed), drawn on the server. The same
 * numbers are in the table next to it; the aria-label says them for screen readers.
 */
export function channelChart(title: string, counts: Record<string, Record<string, number>>): Html {
  const rowH = 34;
  const labelW = 90;
  const barW = 420;
  const totalW = labelW + barW + 70;
  const max = Math.max(1, ...CHANNELS.map((c) => STATUS_ORDER.reduce((s, st) => s + (counts[c]?.[st] ?? 0), 0)));
  const label = `${title}: ` + CHANNELS.map((c) => `${c} ${STATUS_ORDER.map((st) => `${counts[c]?.[st] ?? 0} ${st}`).join(', ')}`).join('; ');
  const rows = CHANNELS.map((c, i) => {
    const y = i * rowH + 6;
    let x = labelW;
    const total = STATUS_ORDER.reduce((s, st) => s + (counts[c]?.[st] ?? 0), 0);
    const bars = STATUS_ORDER.map((st) => {
      const n = counts[c]?.[st] ?? 0;
      const w = (n / max) * barW;
      const r = n > 0 ? html`<rect class="${BAR_CLASS[st]}" x="${x.toFixed(1)}" y="${y}" width="${Math.max(w, 1).toFixed(1)}" height="${rowH - 14}"><title>${c}: ${n} ${st}</title></rect>` : html``;
      x += n > 0 ? Math.max(w, 1) : 0;
      return r;
    });
    return html`<text class="chart-label" x="0" y="${y + rowH / 2 - 2}">${c}</text>
<rect class="bar-track" x="${labelW}" y="${y}" width="${barW}" height="${rowH - 14}"></rect>
${bars}
<text class="chart-total" x="${labelW + barW + 8}" y="${y + rowH / 2 - 2}">${total}</text>`;
  });
  return html`<figure class="chart">
<svg role="img" aria-label="${label}" viewBox="0 0 ${totalW} ${CHANNELS.length * rowH + 8}" width="100%" preserveAspectRatio="xMinYMin meet">
${rows}
</svg>
<figcaption class="legend"><span class="key key-sent"></span>sent <span class="key key-pending"></span>pending <span class="key key-failed"></span>failed</figcaption>
</figure>`;
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
