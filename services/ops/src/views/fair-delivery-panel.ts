import type { ProviderPaceRow, WaitingFlow } from '@ens/core/internal';
import { clientLink, clip, duration, scrollable } from './components.ts';
import { html, type Html } from './html.ts';

const perSecond = (n: number) => (n >= 10 ? n.toFixed(0) : n.toFixed(1));

/**
 * The dashboard's Fair delivery section: whose deliveries wait, with their weights, and each paced
 * provider.
 */
export function fairDeliveryPanel(
  flows: WaitingFlow[],
  paces: ProviderPaceRow[],
  windowMinutes: number,
): Html {
  return html`<section id="fair-delivery" aria-labelledby="fair-delivery-h">
<h2 id="fair-delivery-h">Fair delivery</h2>
<p class="muted">Deliveries due and waiting for a send, by client, tenant and channel, largest first (at most 20 rows). Each channel's send slots are shared between the clients with work in proportion to their weights, and between a client's tenants by theirs; a client's priority event types go ahead of its other messages. Set them with <code>ens clients schedule</code>.</p>
${scrollable(
  'Waiting deliveries by client and tenant',
  html`<table id="waiting-by-flow">
<caption>Waiting deliveries by client and tenant</caption>
<thead><tr><th scope="col">Client</th><th scope="col">Tenant</th><th scope="col">Channel</th><th scope="col" class="num">Waiting</th><th scope="col" class="num">Oldest</th><th scope="col" class="num">Client weight</th><th scope="col" class="num">Tenant weight</th><th scope="col">Priority event types</th></tr></thead>
<tbody>
${flows.length === 0 ? html`<tr><td colspan="8" class="muted">Nothing is waiting.</td></tr>` : ''}
${flows.map(
  (f) =>
    html`<tr data-client="${f.client_id}" data-tenant="${f.tenant}" data-channel="${f.channel}"><td>${clientLink(f.client_id, f.client_name, f.internal)}</td><td>${clip(f.tenant)}</td><td>${f.channel}</td><td class="num" data-waiting="${f.waiting}">${f.waiting}</td><td class="num">${duration(f.oldest_seconds)}</td><td class="num">${f.client_weight}</td><td class="num">${f.tenant_weight}</td><td>${f.priority_event_types.length ? clip(f.priority_event_types.join(', ')) : html`<span class="muted">none</span>`}</td></tr>`,
)}
</tbody>
</table>`,
)}
${scrollable(
  'Paced providers',
  html`<table id="provider-pace">
<caption>Paced providers (ENS_PROVIDER_PACE, or the plugin's own pace)</caption>
<thead><tr><th scope="col">Provider</th><th scope="col" class="num">Pace</th><th scope="col" class="num">Sent, last ${windowMinutes} min</th><th scope="col" class="num">Booked ahead</th><th scope="col" class="num">Rate-limited answers</th></tr></thead>
<tbody>
${paces.length === 0 ? html`<tr><td colspan="5" class="muted">No provider is paced.</td></tr>` : ''}
${paces.map(
  (p) =>
    html`<tr data-provider="${p.provider}"><th scope="row">${p.provider}</th><td class="num" data-pace="${p.per_second}">${perSecond(p.per_second)}/s</td><td class="num">${perSecond(p.sent_per_second)}/s</td><td class="num">${p.booked_ahead_ms > 0 ? `${(p.booked_ahead_ms / 1000).toFixed(1)} s` : html`<span class="muted">none</span>`}</td><td class="num">${p.rate_limited}</td></tr>`,
)}
</tbody>
</table>`,
)}
</section>`;
}
