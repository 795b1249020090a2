import type { FastifyInstance } from 'fastify';
import { clientNames } from '../queries/clients.ts';
import {
  deadLetterIdsOfGroup,
  findDeadLetterGroup,
  listDeadLetterGroups,
  listDeadLetters,
  type DeadLetterGroup,
  type DeadLetterRow,
} from '@ens/core/internal';
import {
  actorOf,
  formValue,
  pageContext,
  queryValue,
  redirectWithFlash,
  type ConsoleDeps,
  sendPage,
} from '../request-context.ts';
import {
  actionButton,
  clamp,
  clientLink,
  clip,
  pager,
  query,
  scrollable,
  shortId,
  stacked,
  time,
  totalLine,
} from '../views/components.ts';
import { html, type Html } from '../views/html.ts';
import { consolePage } from '../views/layout.ts';
import { parseCursor } from './clients.ts';
import { UUID } from './deliveries.ts';

const GROUP_KEY = /^[0-9a-f]{32}$/;

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

function groupsTable(
  groups: DeadLetterGroup[],
  names: Map<string, string>,
  csrf: string,
  back: string,
): Html {
  return scrollable(
    'Dead letters by client, URL and error',
    html`<table id="dead-letter-groups">
<caption>Dead letters by client, URL and last error, largest groups first</caption>
<thead><tr><th scope="col">Client</th><th scope="col">URL</th><th scope="col">Last error</th><th scope="col" class="num">Dead letters</th><th scope="col">Died</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${groups.length === 0 ? html`<tr><td colspan="6" class="muted">No dead letter.</td></tr>` : ''}
${groups.map(
  (
    g,
  ) => html`<tr data-group="${g.key}" data-client="${g.client_id}"><td>${clientLink(g.client_id, names.get(g.client_id))}<br><a class="sub-link" href="/ops/dead-letters${query({ client: g.client_id })}">only this client</a></td>
<td>${clamp(g.url, 'url')}</td><td class="error-text">${clamp(g.last_error)}</td>
<td class="num"><a href="/ops/dead-letters/group/${g.key}" aria-label="${plural(g.count, 'dead letter', 'dead letters')} of this group">${g.count}</a></td>
<td>${time(g.last_died)}${g.count > 1 ? html`<span class="sub">first ${time(g.first_died)}</span>` : ''}</td>
<td class="actions-cell">${actionButton('/ops/dead-letters/replay-group', g.count === 1 ? 'Replay' : `Replay ${g.count}`, csrf, { hidden: { group: g.key, back } })}</td></tr>`,
)}
</tbody>
</table>`,
  );
}

function callbacksTable(rows: DeadLetterRow[], csrf: string, back: string): Html {
  return scrollable(
    'Dead letters of this group',
    html`<table id="dead-letters">
<caption>The group's callbacks, oldest first</caption>
<thead><tr><th scope="col">Callback</th><th scope="col">Delivery</th><th scope="col">Recipient <span class="sub-h">/ channel</span></th><th scope="col">Reference</th><th scope="col" class="num">Attempts</th><th scope="col">Died</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="7" class="muted">No dead letter left in this group.</td></tr>` : ''}
${rows.map(
  (
    r,
  ) => html`<tr data-callback-id="${r.id}"><td>${shortId(r.id)}</td><td><a href="/ops/deliveries/${r.delivery_id}">${shortId(r.delivery_id)}</a></td><td>${stacked(clip(r.recipient), r.channel ?? '')}</td><td>${clip(r.reference)}</td><td class="num">${r.attempts}</td><td>${time(r.updated_at)}</td>
<td class="actions-cell">${actionButton(`/ops/dead-letters/${r.id}/replay`, 'Replay', csrf, { hidden: { back } })}</td></tr>`,
)}
</tbody>
</table>`,
  );
}

/** Where a replay sends the browser back to: a dead-letter page, never another site or page. */
function safeBack(v: string): string {
  return /^\/ops\/dead-letters(\?client=[^&#\s\\]*|\/group\/[0-9a-f]{32})?$/.test(v)
    ? v
    : '/ops/dead-letters';
}

export function deadLetterRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { rt } = deps;

  // The store wakes the callbacks role for what it put back in the queue.
  const replayed = async (sel: Parameters<typeof rt.callbacks.replay>[0]): Promise<string[]> =>
    (await rt.callbacks.replay(sel)).map((c) => c.id);

  app.get('/dead-letters', async (req, reply) => {
    const client = queryValue(req.query, 'client');
    const { groups, more, total, groupsTotal } = await listDeadLetterGroups(rt.db, {
      clientId: client || undefined,
    });
    const names = await clientNames(rt.db, [
      ...groups.map((g) => g.client_id),
      ...(client ? [client] : []),
    ]);
    const ctx = pageContext(req, reply, deps, 'dead-letters');
    const back = `/ops/dead-letters${query({ client })}`;
    const scope = client ? html`of ${names.get(client) ?? client}` : html`of every client`;
    return sendPage(
      reply,
      200,
      consolePage(
        ctx,
        'Dead letters',
        html`<h1>Dead-letter callbacks</h1>
<p>Callbacks whose posts failed through every retry, grouped by client, URL and last error: one group is usually one fault. Fix it (the client's receiver, its URL), then replay the group. Replaying queues the callbacks again with a fresh retry schedule and the same <code>webhook-id</code>.</p>
${client ? html`<p>Showing the dead letters of ${clientLink(client, names.get(client))}. <a href="/ops/dead-letters">Show every client</a></p>` : ''}
<div class="card toolbar" id="replay-all-card"><span>${plural(total, 'dead letter', 'dead letters')} ${scope}.</span>
${total > 0 ? actionButton('/ops/dead-letters/replay-all', client ? 'Replay all of this client' : 'Replay all', ctx.csrf, { hidden: client ? { client_id: client } : {} }) : ''}</div>
${totalLine({ id: 'groups-count', total: { n: groupsTotal, atLeast: false }, shown: groups.length, one: 'group', many: 'groups' })}
${groupsTable(groups, names, ctx.csrf, back)}
${more ? html`<p class="muted">Only the largest groups are listed; replay them, or filter by client, to see the rest.</p>` : ''}`,
      ),
    );
  });

  app.get<{ Params: { key: string } }>('/dead-letters/group/:key', async (req, reply) => {
    const ctx = pageContext(req, reply, deps, 'dead-letters');
    const key = req.params.key;
    const group = GROUP_KEY.test(key) ? await findDeadLetterGroup(rt.db, key) : null;
    if (!group) {
      return sendPage(
        reply,
        404,
        consolePage(
          ctx,
          'No such group',
          html`<h1>No dead letters in this group</h1><p>They were replayed, or the link is damaged.</p><p><a href="/ops/dead-letters">All dead letters</a></p>`,
        ),
      );
    }
    const after = parseCursor(queryValue(req.query, 'after'));
    const { rows, next } = await listDeadLetters(rt.db, {
      group: key,
      after: after && UUID.test(after.id) ? after : null,
    });
    const names = await clientNames(rt.db, [group.client_id]);
    const back = `/ops/dead-letters/group/${key}`;
    return sendPage(
      reply,
      200,
      consolePage(
        ctx,
        'Dead-letter group',
        html`<h1>Dead-letter group</h1>
<p><a href="/ops/dead-letters">All dead letters</a></p>
<dl class="facts">
<div><dt>Client</dt><dd>${clientLink(group.client_id, names.get(group.client_id))}</dd></div>
<div><dt>Dead letters</dt><dd id="group-count">${group.count}</dd></div>
<div><dt>Died</dt><dd>${time(group.first_died)} to ${time(group.last_died)}</dd></div>
<div class="wide"><dt>URL</dt><dd class="wrap">${group.url}</dd></div>
<div class="wide"><dt>Last error</dt><dd class="wrap error-text">${group.last_error ?? '—'}</dd></div>
</dl>
<div class="card toolbar">${actionButton('/ops/dead-letters/replay-group', `Replay all ${group.count} of this group`, ctx.csrf, { hidden: { group: key, back: '/ops/dead-letters' } })}</div>
${totalLine({ id: 'dead-letter-count', total: { n: group.count, atLeast: false }, shown: rows.length, one: 'dead letter', many: 'dead letters' })}
${callbacksTable(rows, ctx.csrf, back)}
${pager(next, (a) => `${back}${query({ after: a })}`)}`,
      ),
    );
  });

  app.post<{ Params: { id: string } }>(
    '/dead-letters/:id/replay',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const back = safeBack(formValue(req.body, 'back'));
      if (!UUID.test(req.params.id))
        return redirectWithFlash(reply, deps, back, 'No such callback.');
      const done = await replayed({ ids: [req.params.id] });
      await deps.audit.write({
        ...actorOf(req),
        action: 'dead_letter.replay',
        target: req.params.id,
        detail: { replayed: done.length },
      });
      return redirectWithFlash(
        reply,
        deps,
        back,
        done.length
          ? `Callback ${req.params.id} queued again.`
          : `Callback ${req.params.id} is not a dead letter (already replayed?); nothing was queued.`,
      );
    },
  );

  app.post('/dead-letters/replay-group', { preHandler: app.csrfProtection }, async (req, reply) => {
    const back = safeBack(formValue(req.body, 'back'));
    const key = formValue(req.body, 'group');
    const group = GROUP_KEY.test(key) ? await findDeadLetterGroup(rt.db, key) : null;
    if (!group)
      return redirectWithFlash(
        reply,
        deps,
        '/ops/dead-letters',
        'That group has no dead letter left (already replayed?); nothing was queued.',
      );
    const done = await replayed({ ids: await deadLetterIdsOfGroup(rt.db, key) });
    await deps.audit.write({
      ...actorOf(req),
      action: 'dead_letter.replay_group',
      target: group.client_id,
      detail: { url: group.url, last_error: group.last_error, replayed: done.length },
    });
    // The group's page is empty once replayed: back to the list.
    const to = back.startsWith('/ops/dead-letters/group/') ? '/ops/dead-letters' : back;
    return redirectWithFlash(
      reply,
      deps,
      to,
      `${plural(done.length, 'callback', 'callbacks')} queued again`,
    );
  });

  app.post('/dead-letters/replay-all', { preHandler: app.csrfProtection }, async (req, reply) => {
    const clientId = formValue(req.body, 'client_id').trim();
    const done = await replayed(clientId ? { clientId } : {});
    await deps.audit.write({
      ...actorOf(req),
      action: 'dead_letter.replay_all',
      target: clientId || null,
      detail: { replayed: done.length, scope: clientId ? 'client' : 'all' },
    });
    return redirectWithFlash(
      reply,
      deps,
      `/ops/dead-letters${query({ client: clientId })}`,
      `${plural(done.length, 'callback', 'callbacks')} queued again`,
    );
  });
}
