import type { FastifyInstance } from 'fastify';
import { wakeCallbacks } from '@ens/core/internal';
import { listDeadLetters, type DeadLetterRow } from '../queries/dead-letters.ts';
import { actorOf, formValue, pageContext, queryValue, redirectWithFlash, type ConsoleDeps, sendPage } from '../request-context.ts';
import { actionButton, field, orDash, pager, query, time } from '../views/components.ts';
import { html, type Html } from '../views/html.ts';
import { consolePage } from '../views/layout.ts';
import { parseCursor } from './clients.ts';
import { UUID } from './deliveries.ts';

function table(rows: DeadLetterRow[], csrf: string, back: string): Html {
  return html`<table id="dead-letters">
<caption>Callbacks that ran out of retries, oldest first</caption>
<thead><tr><th scope="col">Callback</th><th scope="col">Client</th><th scope="col">Delivery</th><th scope="col">URL</th><th scope="col" class="num">Attempts</th><th scope="col">Last error</th><th scope="col">Died</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="8" class="muted">No dead letter.</td></tr>` : ''}
${rows.map((r) => html`<tr data-callback-id="${r.id}"><td><code>${r.id}</code></td><td><a href="/ops/dead-letters${query({ client: r.client_id })}"><code>${r.client_id}</code></a></td>
<td><a href="/ops/deliveries/${r.delivery_id}"><code>${r.delivery_id}</code></a></td><td class="wrap">${r.url}</td><td class="num">${r.attempts}</td><td class="error-text">${orDash(r.last_error)}</td><td>${time(r.updated_at)}</td>
<td>${actionButton(`/ops/dead-letters/${r.id}/replay`, 'Replay', csrf, { hidden: { back } })}</td></tr>`)}
</tbody>
</table>`;
}

/** Where a replay sends the browser back to: the dead-letter list, keeping its client filter. */
function safeBack(v: string): string {
  return /^\/ops\/dead-letters(\?client=[^&#\s\\]*)?$/.test(v) ? v : '/ops/dead-letters';
}

export function deadLetterRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { rt } = deps;

  app.get('/dead-letters', async (req, reply) => {
    const client = queryValue(req.query, 'client');
    const after = parseCursor(queryValue(req.query, 'after'));
    const validAfter = after && UUID.test(after.id) ? after : null;
    const { rows, next } = await listDeadLetters(rt.db, { clientId: client || undefined, after: validAfter });
    const ctx = pageContext(req, reply, deps, 'dead-letters');
    const back = `/ops/dead-letters${query({ client })}`;
    return sendPage(
      reply,
      200,
      consolePage(ctx, 'Dead letters', html`<h1>Dead-letter callbacks</h1>
<p>Callbacks whose posts failed through every retry. Replaying queues them again with a fresh retry schedule and the same <code>webhook-id</code>.</p>
<form method="get" action="/ops/dead-letters" class="filters inline-filters" role="search" aria-label="Filter dead letters">
${field({ name: 'client', label: 'Client', value: client })}
<div class="actions"><button type="submit" class="button secondary">Filter</button>${client ? html` <a class="button secondary" href="/ops/dead-letters">Show all</a>` : ''}</div>
</form>
${client ? html`<div class="card">${actionButton('/ops/dead-letters/replay-all', 'Replay all for this client', ctx.csrf, { hidden: { client_id: client } })}</div>` : ''}
${table(rows, ctx.csrf, back)}
${pager(next, (a) => `/ops/dead-letters${query({ client, after: a })}`)}`),
    );
  });

  app.post<{ Params: { id: string } }>('/dead-letters/:id/replay', { preHandler: app.csrfProtection }, async (req, reply) => {
    const back = safeBack(formValue(req.body, 'back'));
    if (!UUID.test(req.params.id)) return redirectWithFlash(reply, deps, back, 'No such callback.');
    const replayed = await rt.callbacks.replay({ ids: [req.params.id] });
    wakeCallbacks(rt.nc, replayed, rt.logger);
    await deps.audit.write({ ...actorOf(req), action: 'dead_letter.replay', target: req.params.id, detail: { replayed: replayed.length } });
    return redirectWithFlash(reply, deps, back, replayed.length ? `Callback ${req.params.id} queued again.` : `Callback ${req.params.id} is not a dead letter (already replayed?); nothing was queued.`);
  });

  app.post('/dead-letters/replay-all', { preHandler: app.csrfProtection }, async (req, reply) => {
    const clientId = formValue(req.body, 'client_id').trim();
    if (!clientId) return redirectWithFlash(reply, deps, '/ops/dead-letters', 'Choose a client first: replay all works per client.');
    const replayed = await rt.callbacks.replay({ clientId });
    wakeCallbacks(rt.nc, replayed, rt.logger);
    await deps.audit.write({ ...actorOf(req), action: 'dead_letter.replay_all', target: clientId, detail: { replayed: replayed.length } });
    return redirectWithFlash(reply, deps, `/ops/dead-letters${query({ client: clientId })}`, `${replayed.length} callbacks queued again`);
  });
}
