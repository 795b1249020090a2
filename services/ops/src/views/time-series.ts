import type { Series, StatusCounts } from '../queries/summary.ts';
import { percent } from './components.ts';
import { html, type Html } from './html.ts';

/*
 * Time series drawn on the server as SVG columns (no chart library, no script): one small chart per
 * channel, sent at the bottom, then pending, then failed, by the minute or hour the deliveries were
 * accepted in. The aria-label says the totals, the failure rate and the busiest bucket; each column
 * has a <title> with its own numbers for a pointer.
 *
 * The SVG has no viewBox: columns are placed in percentages of its width and heights in pixels, so
 * the labels keep their CSS size at any width (a scaled viewBox drew them at 8 px), and the y-axis
 * shows round steps with grid lines (0, a middle, the top), not only the maximum.
 */

/**
 * Height of the plot area, in CSS pixels, and the room above it for the top label and the
 * channel's name (drawn over that band, so it takes no line of its own).
 */
const PLOT = 64;
const TOP = 18;
const AXIS = 16;
const ORDER = ['sent', 'pending', 'failed'] as const;

function rate(c: StatusCounts): number | null {
  const ended = c.sent + c.failed;
  return ended === 0 ? null : Math.round((c.failed / ended) * 10000) / 100;
}

function clock(iso: string): string {
  return iso.slice(11, 16);
}

/**
 * Round y-axis steps for counts up to `max`: a step of 1, 2 or 5 × 10^n (never below 1), so the
 * axis reads in two to four steps; `top` is the last tick, at or above `max`.
 */
export function yTicks(max: number): { top: number; ticks: number[] } {
  const rough = Math.max(1, max) / 3;
  const mag = 10 ** Math.floor(Math.log10(rough));
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= rough)!);
  const top = Math.max(step, Math.ceil(Math.max(1, max) / step) * step);
  const ticks: number[] = [];
  for (let v = 0; v <= top; v += step) ticks.push(v);
  return { top, ticks };
}

export function totals(points: StatusCounts[]): StatusCounts {
  return points.reduce(
    (a, p) => ({
      pending: a.pending + p.pending,
      sent: a.sent + p.sent,
      failed: a.failed + p.failed,
    }),
    { pending: 0, sent: 0, failed: 0 },
  );
}

const pct = (n: number) => `${n.toFixed(3)}%`;

function chart(
  channel: string,
  unit: 'minute' | 'hour',
  buckets: string[],
  points: StatusCounts[],
): Html {
  const t = totals(points);
  const sums = points.map((p) => p.pending + p.sent + p.failed);
  const { top, ticks } = yTicks(Math.max(0, ...sums));
  const busiest = sums.indexOf(Math.max(...sums));
  const slot = 100 / points.length;
  const gap = points.length > 30 ? 0.25 : 0.6;
  const labelEvery = unit === 'minute' ? 15 : 6;
  const yOf = (v: number) => TOP + PLOT - (v / top) * PLOT;
  const label =
    `${channel}, per ${unit} over the last ${unit === 'minute' ? 'hour' : '24 hours'}: ${t.sent} sent, ${t.failed} failed, ${t.pending} pending; failure rate ${percent(rate(t))}` +
    (sums[busiest]! > 0
      ? `; busiest ${unit} ${clock(buckets[busiest]!)} UTC with ${sums[busiest]}`
      : '');
  const columns = points.map((p, i) => {
    let y = TOP + PLOT;
    const x = pct(i * slot + gap / 2);
    const w = pct(Math.max(0.2, slot - gap));
    const parts = ORDER.map((st) => {
      if (p[st] === 0) return html``;
      const h = (p[st] / top) * PLOT;
      y -= h;
      return html`<rect class="bar-${st}" x="${x}" y="${y.toFixed(1)}" width="${w}" height="${Math.max(h, 1).toFixed(1)}"></rect>`;
    });
    const total = p.pending + p.sent + p.failed;
    return html`<g><title>${clock(buckets[i]!)} UTC: ${p.sent} sent, ${p.failed} failed, ${p.pending} pending${total > 0 ? `, failure rate ${percent(rate(p))}` : ''}</title><rect class="bar-hit" x="${pct(i * slot)}" y="${TOP}" width="${pct(slot)}" height="${PLOT}"></rect>${parts}</g>`;
  });
  const grid = ticks.map(
    (v) =>
      html`<line class="${v === 0 ? 'baseline' : 'gridline'}" x1="0" x2="100%" y1="${yOf(v).toFixed(1)}" y2="${yOf(v).toFixed(1)}"></line>`,
  );
  // Drawn after the columns, with a halo (paint-order in the stylesheet), so a column never hides
  // one.
  const yLabels = ticks
    .filter((v) => v > 0)
    .map(
      (v) =>
        html`<text class="axis y-tick" x="2" y="${(yOf(v) + 4).toFixed(1)}">${v.toLocaleString('en')}</text>`,
    );
  const xLabels = buckets.map((b, i) =>
    i % labelEvery === 0
      ? html`<text class="axis x-tick" x="${pct(i * slot)}" y="${TOP + PLOT + AXIS - 3}">${clock(b)}</text>`
      : html``,
  );
  return html`<figure class="series" data-channel="${channel}" data-unit="${unit}">
<figcaption><strong>${channel}</strong></figcaption>
<svg role="img" aria-label="${label}" width="100%" height="${TOP + PLOT + AXIS}">
${grid}
${columns}
<text class="axis y-tick" x="2" y="${TOP + PLOT - 3}">0</text>
${yLabels}
${xLabels}
</svg>
</figure>`;
}

/**
 * The four channels' charts for one period. Their counts are said once, in the tables of
 * deliveries by channel and status under them (and in each chart's label for screen readers).
 */
export function seriesPanel(
  series: Series,
  unit: 'minute' | 'hour',
  channels: readonly string[],
): Html {
  return html`<div class="series-grid">${channels.map((c) => chart(c, unit, series.buckets, series.by_channel[c] ?? []))}</div>`;
}

/** The colours of every chart of the traffic section, said once. */
export function seriesLegend(): Html {
  return html`<p class="legend"><span class="key key-sent"></span>sent <span class="key key-pending"></span>pending <span class="key key-failed"></span>failed</p>`;
}
