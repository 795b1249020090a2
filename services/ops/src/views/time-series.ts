import type { Series, StatusCounts } from '../queries/summary.ts';
import { percent } from './components.ts';
import { html, type Html } from './html.ts';

/*
 * Time series drawn on the server as SVG columns (no chart library, no script): one small chart per
 * channel, sent at the bottom, then pending, then failed, by the minute or hour the deliveries were
 * accepted in. The aria-label says the totals, the failure rate and the busiest bucket; each column
 * has a <title> with its own numbers for a pointer.
 */

const W = 600;
const H = 120;
const AXIS = 18;
const ORDER = ['sent', 'pending', 'failed'] as const;

function rate(c: StatusCounts): number | null {
  const ended = c.sent + c.failed;
  return ended === 0 ? null : Math.round((c.failed / ended) * 10000) / 100;
}

function clock(iso: string): string {
  return iso.slice(11, 16);
}

export function totals(points: StatusCounts[]): StatusCounts {
  return points.reduce((a, p) => ({ pending: a.pending + p.pending, sent: a.sent + p.sent, failed: a.failed + p.failed }), { pending: 0, sent: 0, failed: 0 });
}

function chart(channel: string, unit: 'minute' | 'hour', buckets: string[], points: StatusCounts[]): Html {
  const t = totals(points);
  const sums = points.map((p) => p.pending + p.sent + p.failed);
  const max = Math.max(1, ...sums);
  const busiest = sums.indexOf(Math.max(...sums));
  const slot = W / points.length;
  const barW = Math.max(1, slot - (points.length > 30 ? 2 : 4));
  const labelEvery = unit === 'minute' ? 10 : 4;
  const label = `${channel}, per ${unit} over the last ${unit === 'minute' ? 'hour' : '24 hours'}: ${t.sent} sent, ${t.failed} failed, ${t.pending} pending; failure rate ${percent(rate(t))}` +
    (sums[busiest]! > 0 ? `; busiest ${unit} ${clock(buckets[busiest]!)} UTC with ${sums[busiest]}` : '');
  const columns = points.map((p, i) => {
    let y = H;
    const x = (i * slot).toFixed(1);
    const parts = ORDER.map((st) => {
      const h = (p[st] / max) * (H - 14);
      if (p[st] === 0) return html``;
      y -= h;
      return html`<rect class="bar-${st}" x="${x}" y="${y.toFixed(1)}" width="${barW.toFixed(1)}" height="${Math.max(h, 1).toFixed(1)}"></rect>`;
    });
    const total = p.pending + p.sent + p.failed;
    return html`<g><title>${clock(buckets[i]!)} UTC: ${p.sent} sent, ${p.failed} failed, ${p.pending} pending${total > 0 ? `, failure rate ${percent(rate(p))}` : ''}</title><rect class="bar-hit" x="${x}" y="0" width="${slot.toFixed(1)}" height="${H}"></rect>${parts}</g>`;
  });
  const ticks = buckets.map((b, i) => (i % labelEvery === 0 ? html`<text class="axis" x="${(i * slot).toFixed(1)}" y="${H + AXIS - 4}">${clock(b)}</text>` : html``));
  return html`<figure class="series" data-channel="${channel}" data-unit="${unit}">
<figcaption><strong>${channel}</strong> <span class="series-totals"><span data-count="sent">${t.sent}</span> sent · <span data-count="failed">${t.failed}</span> failed · <span data-count="pending">${t.pending}</span> pending · failure rate <span data-rate>${percent(rate(t))}</span></span></figcaption>
<svg role="img" aria-label="${label}" viewBox="0 0 ${W} ${H + AXIS}" width="100%" preserveAspectRatio="xMinYMin meet">
<line class="baseline" x1="0" y1="${H}" x2="${W}" y2="${H}"></line>
<text class="axis max" x="${W}" y="10" text-anchor="end">${max}</text>
${columns}
${ticks}
</svg>
</figure>`;
}

/** The four channels' charts for one period. */
export function seriesPanel(series: Series, unit: 'minute' | 'hour', channels: readonly string[]): Html {
  return html`<div class="series-grid">${channels.map((c) => chart(c, unit, series.buckets, series.by_channel[c] ?? []))}</div>
<p class="legend"><span class="key key-sent"></span>sent <span class="key key-pending"></span>pending <span class="key key-failed"></span>failed · by the ${unit} the deliveries were accepted in, UTC; a delivery counts where it is now (pending until it ends)</p>`;
}
