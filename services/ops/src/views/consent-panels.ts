import { SUPPRESSION_REASONS, type SuppressionReasonT } from '@ens/core';
import type {
  ConsentSummary,
  SuppressionsPerDay,
  TenantRates,
} from '../queries/consent-summary.ts';
import { clientLink, duration, percent, query, scrollable, time } from './components.ts';
import { html, type Html } from './html.ts';

/*
 * The dashboard's consent panels: suppressions added per day (SVG columns stacked by reason, drawn
 * on the server like the traffic series, with the numbers in a table behind a disclosure), and
 * each tenant's email bounce and complaint rates against the 0.3 % complaint limit that Gmail and
 * Yahoo set for bulk senders, drawn as a line through every row's meter and said in words.
 */

/** How a reason reads on a page. */
export const REASON_LABELS: Record<SuppressionReasonT, string> = {
  hard_bounce: 'hard bounce',
  soft_bounce: 'soft bounce',
  complaint: 'complaint',
  opt_out: 'opt-out',
  invalid_recipient: 'invalid recipient',
  manual: 'manual',
};

/*
 * Heights in pixels and columns in percent of the width, with no viewBox (as the traffic series):
 * a scaled viewBox made the chart's height grow with the window's width (over 200 px at 1,280).
 */
const H = 56;
const TOP = 12;
const AXIS = 18;

function dayLabel(day: string): string {
  return day.slice(5);
}

const pct = (n: number) => `${n.toFixed(3)}%`;

function perDayChart(p: SuppressionsPerDay): Html {
  const sums = p.days.map((_, i) =>
    SUPPRESSION_REASONS.reduce((s, r) => s + p.by_reason[r][i]!, 0),
  );
  const totals = SUPPRESSION_REASONS.map(
    (r) => [r, p.by_reason[r].reduce((a, b) => a + b, 0)] as const,
  );
  const all = sums.reduce((a, b) => a + b, 0);
  const max = Math.max(1, ...sums);
  const slot = 100 / p.days.length;
  const gap = Math.min(slot / 4, 1.2);
  const said = totals
    .filter(([, n]) => n > 0)
    .map(([r, n]) => `${n} ${REASON_LABELS[r]}`)
    .join(', ');
  const label = `Suppressions added per day over the last ${p.days.length} days: ${all} in all${said ? ` (${said})` : ''}`;
  const columns = p.days.map((day, i) => {
    let y = TOP + H;
    const x = pct(i * slot + gap / 2);
    const w = pct(slot - gap);
    const parts = SUPPRESSION_REASONS.map((r) => {
      const n = p.by_reason[r][i]!;
      if (n === 0) return html``;
      const h = (n / max) * H;
      y -= h;
      return html`<rect class="reason-${r}" x="${x}" y="${y.toFixed(1)}" width="${w}" height="${Math.max(h, 1).toFixed(1)}"></rect>`;
    });
    const parts2 = SUPPRESSION_REASONS.filter((r) => p.by_reason[r][i]! > 0).map(
      (r) => `${p.by_reason[r][i]} ${REASON_LABELS[r]}`,
    );
    return html`<g><title>${day}: ${sums[i]} added${parts2.length ? ` (${parts2.join(', ')})` : ''}</title><rect class="bar-hit" x="${pct(i * slot)}" y="${TOP}" width="${pct(slot)}" height="${H}"></rect>${parts}</g>`;
  });
  const ticks = p.days.map((d, i) =>
    (p.days.length - 1 - i) % 2 === 0
      ? html`<text class="axis" x="${pct(i * slot + gap / 2)}" y="${TOP + H + AXIS - 4}">${dayLabel(d)}</text>`
      : html``,
  );
  return html`<figure class="series consent-series" id="suppressions-per-day-chart">
<figcaption><strong>All clients</strong> <span class="series-totals"><span data-count="all">${all}</span> added:${totals.map(([r, n]) => html` <span class="key reason-key-${r}"></span><span data-reason="${r}">${n}</span> ${REASON_LABELS[r]}`)}</span></figcaption>
<svg role="img" aria-label="${label}" width="100%" height="${TOP + H + AXIS}">
<line class="baseline" x1="0" y1="${TOP + H}" x2="100%" y2="${TOP + H}"></line>
<text class="axis max" x="100%" y="10" text-anchor="end">${max}</text>
${columns}
${ticks}
</svg>
</figure>`;
}

function perDayTable(p: SuppressionsPerDay): Html {
  return html`<details class="numbers"><summary>Numbers per day</summary>
${scrollable(
  'Suppressions added per day by reason',
  html`<table id="suppressions-per-day">
<caption>Suppressions added per day (UTC) by reason</caption>
<thead><tr><th scope="col">Day</th>${SUPPRESSION_REASONS.map((r) => html`<th scope="col" class="num">${REASON_LABELS[r]}</th>`)}<th scope="col" class="num">total</th></tr></thead>
<tbody>
${p.days.map((d, i) => html`<tr data-day="${d}"><th scope="row">${d}</th>${SUPPRESSION_REASONS.map((r) => html`<td class="num" data-reason="${r}">${p.by_reason[r][i]}</td>`)}<td class="num" data-total>${SUPPRESSION_REASONS.reduce((s, r) => s + p.by_reason[r][i]!, 0)}</td></tr>`)}
</tbody>
</table>`,
)}
</details>`;
}

/**
 * The panel "Suppressions added per day by reason": the chart (its caption keys each reason's
 * colour to its total), with how it counts beside it.
 */
export function suppressionsPerDayPanel(c: ConsentSummary): Html {
  const p = c.suppressions_per_day;
  return html`<section id="suppressions-added" aria-labelledby="suppressions-added-h">
<h2 id="suppressions-added-h">Suppressions added per day by reason, last ${p?.days.length ?? 14} days</h2>
${
  p === null
    ? html`<p class="warning">The count did not finish within its time limit; it is tried again at the next refresh.</p>
<p><a href="/ops/suppressions">Search the suppression lists</a></p>`
    : html`<div class="chart-beside">
${perDayChart(p)}
<div><p class="muted">Counted on the day (UTC) each entry was first written; a later report about the same address updates its entry and is not counted again.</p>
<p><a href="/ops/suppressions">Search the suppression lists</a></p></div>
</div>
${perDayTable(p)}`
}
</section>`;
}

const METER_W = 160;
const METER_H = 18;

/** A row's complaint rate as a bar on the table's common scale, with the limit drawn as a line. */
function meter(r: TenantRates, scaleMax: number, limit: number): Html {
  const v = r.complaint_percent ?? 0;
  const w = Math.min(METER_W, (v / scaleMax) * METER_W);
  const lx = (limit / scaleMax) * METER_W;
  return html`<svg class="meter" aria-hidden="true" width="${METER_W}" height="${METER_H}" viewBox="0 0 ${METER_W} ${METER_H}">
<rect class="meter-track" x="0" y="4" width="${METER_W}" height="${METER_H - 8}"></rect>
<rect class="${r.over_complaint_limit ? 'meter-over' : 'meter-under'}" x="0" y="4" width="${w.toFixed(1)}" height="${METER_H - 8}"></rect>
<line class="meter-limit" x1="${lx.toFixed(1)}" y1="0" x2="${lx.toFixed(1)}" y2="${METER_H}"></line>
</svg>`;
}

function ratesTable(
  c: NonNullable<ConsentSummary['rates']>,
  isInternal: (clientId: string, tenant: string) => boolean,
): Html {
  const scaleMax = Math.max(2 * c.limit_percent, ...c.rows.map((r) => r.complaint_percent ?? 0));
  return scrollable(
    'Bounce and complaint rates per tenant',
    html`<table id="bounce-complaint-rates">
<caption>Email, per tenant; the line in each bar is the ${c.limit_percent} % complaint limit (bar scale 0 to ${percent(Math.round(scaleMax * 100) / 100)})</caption>
<thead><tr><th scope="col">Tenant <span class="sub-h">/ client</span></th><th scope="col" class="num">Sent</th><th scope="col" class="num">Bounced</th><th scope="col" class="num">Refused</th><th scope="col" class="num">Bounce rate</th><th scope="col" class="num">Complaints</th><th scope="col" class="num">Complaint rate</th><th scope="col">Against the ${c.limit_percent} % line</th></tr></thead>
<tbody>
${c.rows.length === 0 ? html`<tr><td colspan="8" class="muted">No email sent in the last ${c.window_days} days.</td></tr>` : ''}
${c.rows.map(
  (
    r,
  ) => html`<tr data-tenant="${r.tenant}" data-client="${r.client_id}"${r.over_complaint_limit ? html` class="over-limit"` : ''}>
<td><span class="stack"><a class="clip" title="${r.tenant}" href="/ops/suppressions${query({ client: r.client_id, tenant: r.tenant })}">${r.tenant}</a><span class="sub">${clientLink(r.client_id, r.client_name ?? undefined, isInternal(r.client_id, r.tenant))}</span></span></td>
<td class="num" data-count="sent">${r.sent}</td><td class="num" data-count="bounced">${r.bounced}</td><td class="num" data-count="refused">${r.refused}</td><td class="num" data-rate="bounce">${percent(r.bounce_percent)}</td>
<td class="num" data-count="complained">${r.complained}</td><td class="num" data-rate="complaint">${percent(r.complaint_percent)}</td>
<td class="meter-cell">${meter(r, scaleMax, c.limit_percent)} ${r.over_complaint_limit ? html`<span class="badge status-failed">over ${c.limit_percent} %</span>` : html`<span class="badge status-sent">under</span>`}</td></tr>`,
)}
</tbody>
</table>`,
  );
}

/** When the two consent panels were computed: they are cached, unlike the rest of the dashboard. */
function computedAt(c: ConsentSummary): Html {
  return html`This panel and the one above were computed at ${time(c.generated_at)}; they are recomputed at most every ${duration(c.ttl_seconds)}.`;
}

/** The panel "Bounce and complaint rates per tenant". */
export function bounceRatesPanel(
  c: ConsentSummary,
  isInternal: (clientId: string, tenant: string) => boolean,
): Html {
  const r = c.rates;
  // A warning needs its own line; that no tenant is over the limit fits beside the heading.
  const ok =
    r !== null && r.over_limit === 0
      ? html`<p class="ok-note" id="complaint-limit-ok">No tenant is over the ${r.limit_percent} % complaint limit.</p>`
      : html``;
  return html`<section id="bounce-rates" aria-labelledby="bounce-rates-h">
<div class="section-head"><h2 id="bounce-rates-h">Bounce and complaint rates per tenant, last ${r?.window_days ?? 7} days</h2>${ok}</div>
${
  r === null
    ? html`<p class="warning">The rates did not finish within their time limit; they are tried again at the next refresh.</p>
<p class="muted">${computedAt(c)}</p>`
    : html`<p class="muted">Email deliveries created in the last ${r.window_days} days. Bounced: a bounce reported after the send; refused: the provider refused the recipient at send time. Bounce rate: (bounced + refused) / (sent + refused); complaint rate: complaints / sent. Gmail and Yahoo filter or refuse a bulk sender's mail once its spam complaint rate reaches ${r.limit_percent} %. Worst complaint rate first${r.rows.length < r.tenants ? `; the first ${r.rows.length} of ${r.tenants} tenants` : ''}. ${computedAt(c)}</p>
${
  r.over_limit > 0
    ? html`<p class="warning" id="complaint-limit-warning"><strong>${r.over_limit} ${r.over_limit === 1 ? 'tenant is' : 'tenants are'} over the ${r.limit_percent} % complaint limit.</strong> Their mail risks being filtered as spam by Gmail and Yahoo: check what they send and to whom.</p>`
    : ''
}
${ratesTable(r, isInternal)}`
}
</section>`;
}
