import type { Backlog, ChannelBacklog } from '../queries/backlog.ts';
import { duration, scrollable } from './components.ts';
import { html, type Html } from './html.ts';

function ageCell(kind: 'delivery' | 'callback', seconds: number, warnSeconds: number): Html {
  const shown =
    seconds === 0
      ? html`<span class="muted">none waiting</span>`
      : seconds > warnSeconds
        ? html`<strong class="error-text">${duration(seconds)}</strong>`
        : html`${duration(seconds)}`;
  return html`<td class="num" data-kind="${kind}" data-seconds="${Math.floor(seconds)}">${shown}</td>`;
}

function row(c: ChannelBacklog, warnSeconds: number): Html {
  // The state is said in words as well as colour, for readers who cannot tell the colours apart.
  const state = c.aging
    ? html`<span class="badge status-failed">waiting over ${duration(warnSeconds)}</span>`
    : html`<span class="badge status-sent">taken in time</span>`;
  return html`<tr data-channel="${c.channel}"${c.aging ? html` class="aging"` : ''}><th scope="row">${c.channel}</th>${ageCell('delivery', c.delivery_seconds, warnSeconds)}${ageCell('callback', c.callback_seconds, warnSeconds)}<td>${state}</td></tr>`;
}

/**
 * The dashboard's Backlog section: per channel, how long the oldest due work has waited untaken.
 */
export function backlogPanel(b: Backlog): Html {
  return html`<section id="backlog" aria-labelledby="backlog-h">
<h2 id="backlog-h">Backlog</h2>
<p class="muted">The oldest due work no process has taken, across the deployment: seconds when healthy. Past ${duration(b.warn_seconds)}, no worker is taking it: check the worker processes' <code>/readyz</code> (the callbacks processes' for callbacks).</p>
${scrollable(
  'Oldest waiting work per channel',
  html`<table id="backlog-ages">
<caption>Oldest waiting work per channel</caption>
<thead><tr><th scope="col">Channel</th><th scope="col" class="num">Oldest delivery</th><th scope="col" class="num">Oldest callback</th><th scope="col">State</th></tr></thead>
<tbody>
${b.channels.map((c) => row(c, b.warn_seconds))}
</tbody>
</table>`,
)}
</section>`;
}

/**
 * The line at the top of the dashboard when work on some channel has waited past the threshold;
 * empty otherwise.
 */
export function backlogWarning(b: Backlog): Html {
  if (b.aging.length === 0) return html``;
  return html`<p class="warning" id="backlog-warning"><strong>Work is waiting and no worker is taking it.</strong> On ${b.aging.join(', ')}, the oldest due work has waited more than ${duration(b.warn_seconds)}. Check the worker and callbacks processes' <code>/readyz</code>; <a href="#backlog">the backlog panel</a> has the ages.</p>`;
}
