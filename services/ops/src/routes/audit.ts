import type { FastifyInstance } from 'fastify';
import { pageContext, queryValue, sendPage, type ConsoleDeps } from '../request-context.ts';
import { clamp, clip, orDash, pager, scrollable, time } from '../views/components.ts';
import { html } from '../views/html.ts';
import { consolePage } from '../views/layout.ts';

const PAGE = 50;

export function auditRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get('/audit', async (req, reply) => {
    const before = queryValue(req.query, 'before');
    const rows = await deps.audit.page({ before: /^\d{1,18}$/.test(before) ? before : undefined, limit: PAGE + 1 });
    const page = rows.slice(0, PAGE);
    const next = rows.length > PAGE ? page[page.length - 1]!.id : null;
    const ctx = pageContext(req, reply, deps, 'audit');
    return sendPage(
      reply,
      200,
      consolePage(ctx, 'Audit log', html`<h1>Audit log</h1>
<p>Every action taken in the console or with <code>ens staff</code> and <code>ens clients</code> (actor <code>cli</code>), newest first.</p>
${scrollable('Audit log', html`<table id="audit">
<caption>Staff actions</caption>
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Detail</th></tr></thead>
<tbody>
${page.length === 0 ? html`<tr><td colspan="5" class="muted">Nothing yet.</td></tr>` : ''}
${page.map((r) => html`<tr data-audit-id="${r.id}" data-action="${r.action}"><td>${time(r.at)}</td><td>${clip(r.actor)}</td><td><code>${r.action}</code></td><td>${r.target ? html`<span class="clip target" title="${r.target}">${r.target}</span>` : orDash(null)}</td>
<td>${Object.keys(r.detail).length === 0 ? html`<span class="muted">—</span>` : clamp(JSON.stringify(r.detail), 'detail')}</td></tr>`)}
</tbody>
</table>`)}
${pager(next, (a) => `/ops/audit?before=${a}`)}`),
    );
  });
}
