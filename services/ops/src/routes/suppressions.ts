import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  CHANNELS,
  isHttpError,
  addressWording,
  normaliseAddress,
  SUPPRESSION_REASONS,
  type Channel,
  type ClientRow,
  type Suppression,
  type SuppressionReasonT,
} from '@ens/core';
import { existingDeliveries, inTransaction } from '@ens/core/internal';
import {
  clientChoices,
  countTenant,
  findAcrossTenants,
  ACROSS_TENANTS_SHOWN,
  COUNT_BOUND,
} from '../queries/suppressions.ts';
import {
  actorOf,
  formValue,
  pageContext,
  queryValue,
  redirectWithFlash,
  sendPage,
  type ConsoleDeps,
} from '../request-context.ts';
import { REASON_LABELS } from '../views/consent-panels.ts';
import {
  clamp,
  clip,
  field,
  orDash,
  pager,
  query,
  reasonBadge,
  scrollable,
  selectField,
  shortId,
  stacked,
  textareaField,
  time,
} from '../views/components.ts';
import { html, raw, type Html } from '../views/html.ts';
import { consolePage, csrfField, type PageContext } from '../views/layout.ts';

/*
 * The suppression lists, per client and tenant: browse one tenant's list (cursor-paged, counted up
 * to a bound), find an address in one tenant or across all of a client's tenants, add an entry by
 * hand and remove one. Additions and removals carry a note and go to the audit log with it.
 * Addresses are normalised as the send path keys them, so what is searched is what is matched.
 */

const PAGE = 50;
const MAX_NOTE = 1000;
const MAX_ADDRESS = 254;
const MAX_TENANT = 200;
const TENANT_CHOICES = 200;

type Filter = 'client' | 'tenant' | 'channel' | 'reason' | 'address' | 'cursor';
type Raw = Record<Filter, string>;
type AddField = 'tenant' | 'channel' | 'address' | 'reason' | 'scope' | 'note';
type Errors<K extends string> = Partial<Record<K | 'form', string>>;

const isChannel = (v: string): v is Channel => (CHANNELS as readonly string[]).includes(v);
const isReason = (v: string): v is SuppressionReasonT =>
  (SUPPRESSION_REASONS as readonly string[]).includes(v);
const tenantOk = (v: string) => v.length <= MAX_TENANT && /^[^/\s]+$/.test(v);
const scopeOk = (v: string) => v.length <= 200 && /^[^\s]+$/.test(v);

/**
 * The (channel, key) pairs an address typed into the search stands for: one channel's, or every
 * channel it is an address of.
 */
export function searchKeys(
  address: string,
  channel: Channel | null,
): { channel: Channel; address: string }[] {
  const out: { channel: Channel; address: string }[] = [];
  for (const c of channel ? [channel] : CHANNELS) {
    const key = normaliseAddress(c, address);
    if (key !== null) out.push({ channel: c, address: key });
  }
  return out;
}

function listUrl(p: Partial<Raw>): string {
  return `/ops/suppressions${query(p)}`;
}

/** A link back into the list, checked so that a form cannot send the browser elsewhere. */
function safeBack(v: string): string {
  return /^\/ops\/suppressions(\?[^\s]*)?$/.test(v) && !v.includes('//') ? v : '/ops/suppressions';
}

function filterForm(
  r: Raw,
  errors: Errors<Filter>,
  clients: { id: string; name: string }[] | null,
  tenants: string[],
): Html {
  const clientInput = clients
    ? selectField({
        name: 'client',
        label: 'Client',
        value: r.client,
        error: errors.client,
        options: [
          { value: '', label: 'Choose a client' },
          ...clients.map((c) => ({
            value: c.id,
            label: c.name === c.id ? c.id : `${c.name} (${c.id})`,
          })),
        ],
      })
    : field({ name: 'client', label: 'Client id', value: r.client, error: errors.client });
  return html`<form method="get" action="/ops/suppressions" class="filters" role="search" aria-label="Search the suppression lists">
${clientInput}
${field({ name: 'tenant', label: 'Tenant', value: r.tenant, error: errors.tenant, hint: 'Empty: search every tenant of the client by address', attrs: tenants.length ? raw(' list="tenant-choices" autocomplete="off"') : undefined })}
${tenants.length ? html`<datalist id="tenant-choices">${tenants.map((t) => html`<option value="${t}"></option>`)}</datalist>` : ''}
${field({ name: 'address', label: 'Address', value: r.address, error: errors.address, hint: 'Matched as sends are: email case-folded, phone numbers in E.164' })}
${selectField({ name: 'channel', label: 'Channel', value: r.channel, error: errors.channel, options: [{ value: '', label: 'Any' }, ...CHANNELS.map((c) => ({ value: c, label: c }))] })}
${selectField({ name: 'reason', label: 'Reason', value: r.reason, error: errors.reason, options: [{ value: '', label: 'Any' }, ...SUPPRESSION_REASONS.map((r) => ({ value: r, label: REASON_LABELS[r] }))] })}
<div class="actions"><button type="submit" class="button">Search</button> <a href="/ops/suppressions" class="button secondary">Clear</a></div>
</form>`;
}

function addForm(
  csrf: string,
  clientId: string,
  values: Partial<Record<AddField, string>>,
  errors: Errors<AddField>,
  tenants: string[],
): Html {
  return html`<form id="add-suppression" method="post" action="/ops/suppressions" class="card add-entry" aria-labelledby="add-suppression-h">
<h2 id="add-suppression-h">Add an entry</h2>
${csrfField(csrf)}
<input type="hidden" name="client" value="${clientId}">
${errors.form ? html`<p class="error-summary" role="alert">${errors.form}</p>` : ''}
<p class="muted">Sends to this address in this tenant, for the scope given, end failed without a provider call from the moment it is saved, including sends already accepted.</p>
${field({ name: 'add_tenant', label: 'Tenant', value: values.tenant, error: errors.tenant, required: true, attrs: tenants.length ? raw(' list="tenant-choices" autocomplete="off"') : undefined })}
${selectField({ name: 'add_channel', label: 'Channel', value: values.channel ?? 'email', error: errors.channel, options: CHANNELS.map((c) => ({ value: c, label: c })) })}
${field({ name: 'add_address', label: 'Address', value: values.address, error: errors.address, required: true })}
${selectField({ name: 'add_reason', label: 'Reason', value: values.reason ?? 'manual', error: errors.reason, options: SUPPRESSION_REASONS.map((r) => ({ value: r, label: REASON_LABELS[r] })) })}
${field({ name: 'add_scope', label: 'Scope', value: values.scope ?? '*', error: errors.scope, hint: '* for every event type, or one event type' })}
${textareaField({ name: 'add_note', label: 'Note (why)', value: values.note, error: errors.note, required: true, maxLength: MAX_NOTE, hint: 'Kept as the entry\'s evidence and in the audit log, e.g. "customer asked by phone, ticket ' + '4411"' })}
<div class="actions"><button type="submit" class="button">Add to the suppression list</button></div>
</form>`;
}

function evidence(s: Suppression, live: Set<string>): Html {
  // One line under the detail for where it came from, so a row stays at most three lines tall.
  const delivery = s.delivery_id
    ? live.has(s.delivery_id)
      ? html`<a href="/ops/deliveries/${s.delivery_id}">delivery ${shortId(s.delivery_id)}</a>`
      : html`delivery ${shortId(s.delivery_id)} (no longer kept)`
    : '';
  const provider = s.provider ? html`<code>${s.provider}</code>` : '';
  const from =
    provider || delivery
      ? html`<span class="sub">${provider}${provider && delivery ? ' · ' : ''}${delivery}</span>`
      : '';
  return html`${clamp(s.detail)}${from}`;
}

function removeHref(clientId: string, s: Suppression, back: string): string {
  return `/ops/suppressions/remove${query({ client: clientId, tenant: s.tenant, channel: s.channel, address: s.address, scope: s.scope, back })}`;
}

function entriesTable(
  clientId: string,
  rows: Suppression[],
  live: Set<string>,
  acrossTenants: boolean,
  back: string,
): Html {
  const cols = acrossTenants ? 7 : 6;
  const removeName = (s: Suppression) =>
    `Remove ${s.channel} ${s.address} (${s.scope === '*' ? 'every event type' : s.scope})`;
  return scrollable(
    'Suppression list entries',
    html`<table id="suppressions"${acrossTenants ? html` class="across"` : ''}>
<caption>Entries${acrossTenants ? ' in every tenant of the client' : ''}, by channel and address (times in UTC)</caption>
<thead><tr>${acrossTenants ? html`<th scope="col">Tenant</th>` : ''}<th scope="col">Address <span class="sub-h">/ channel</span></th><th scope="col">Scope</th><th scope="col">Reason <span class="sub-h">/ source, by</span></th><th scope="col">Evidence</th><th scope="col">Created <span class="sub-h">/ updated, expires</span></th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="${cols}" class="muted">No entry matches.</td></tr>` : ''}
${rows.map(
  (
    s,
  ) => html`<tr data-tenant="${s.tenant}" data-channel="${s.channel}" data-address="${s.address}" data-scope="${s.scope}" data-reason="${s.reason}">
${acrossTenants ? html`<td>${clip(s.tenant)}</td>` : ''}<td>${stacked(clip(s.address), s.channel)}</td><td>${s.scope === '*' ? html`<span title="every event type">*</span>` : clip(s.scope)}</td>
<td>${stacked(reasonBadge(s.reason, REASON_LABELS[s.reason]), html`<span class="clip" title="${s.source}${s.created_by ? ` · ${s.created_by}` : ''}">${s.source}${s.created_by ? ` · ${s.created_by}` : ''}</span>`)}</td><td>${evidence(s, live)}</td>
<td><span class="stack">${time(s.created_at)}<span class="sub">${s.updated_at !== s.created_at ? html`updated ${time(s.updated_at)}` : 'not updated'}</span><span class="sub">${!s.expires_at ? 'never expires' : Date.parse(s.expires_at) <= Date.now() ? html`lapsed ${time(s.expires_at)}` : html`expires ${time(s.expires_at)}`}</span></span></td>
<td class="actions-cell"><a class="button secondary button-small" href="${removeHref(clientId, s, back)}" aria-label="${removeName(s)}">Remove</a></td></tr>`,
)}
</tbody>
</table>`,
  );
}

interface ListState {
  raw: Raw;
  errors: Errors<Filter>;
  add?: { values: Partial<Record<AddField, string>>; errors: Errors<AddField> };
}

export function suppressionRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { rt } = deps;

  /**
   * Which deliveries named by entries still exist (retention removes old ones): one primary-key
   * look-up each.
   */
  const liveDeliveries = async (rows: Suppression[]): Promise<Set<string>> => {
    const ids = [...new Set(rows.map((r) => r.delivery_id).filter((v): v is string => v !== null))];
    return existingDeliveries(rt.db, ids);
  };

  const tenantNames = async (client: ClientRow | null): Promise<string[]> =>
    client
      ? (await rt.tenants.list(client.id, { limit: TENANT_CHOICES })).map((t) => t.tenant)
      : [];

  const render = async (
    req: FastifyRequest,
    reply: FastifyReply,
    state: ListState,
    status = 200,
  ): Promise<FastifyReply> => {
    const ctx = pageContext(req, reply, deps, 'suppressions');
    const { raw: r } = state;
    const errors: Errors<Filter> = { ...state.errors };
    const channel = r.channel && isChannel(r.channel) ? r.channel : null;
    const reason = r.reason && isReason(r.reason) ? r.reason : null;
    if (r.channel && !channel) errors.channel = `Choose one of ${CHANNELS.join(', ')}.`;
    if (r.reason && !reason) errors.reason = `Choose one of ${SUPPRESSION_REASONS.join(', ')}.`;
    if (r.address.length > MAX_ADDRESS)
      errors.address = `Too long: an address has at most ${MAX_ADDRESS} characters.`;
    if (r.tenant && !tenantOk(r.tenant))
      errors.tenant = 'A tenant id has no spaces or slashes and at most 200 characters.';
    const client = r.client ? await rt.clients.get(r.client) : null;
    if (r.client && !client) errors.client ??= 'No client has this id.';
    if (client && r.tenant && !errors.tenant && !(await rt.tenants.get(client.id, r.tenant)))
      errors.tenant = `Client ${client.name} has no tenant with this id.`;
    const keys = r.address && !errors.address ? searchKeys(r.address, channel) : [];
    if (r.address && !errors.address && keys.length === 0)
      errors.address = channel
        ? `Not ${addressWording(channel)}.`
        : 'Not an address of any channel.';
    if (r.cursor && (!r.tenant || r.address))
      errors.cursor = 'The page link is damaged; start the search again.';

    const [clients, tenants] = await Promise.all([clientChoices(rt.db), tenantNames(client)]);
    const parts: Html[] = [
      html`<h1>Suppressions</h1>
<p class="muted">Per client and tenant: addresses ENS will not send to, with why and the evidence. Sends to an address on a list end failed without any provider call, including sends already accepted.</p>`,
      filterForm(r, errors, clients, tenants),
    ];
    const bad = Object.keys(errors).length > 0;
    if (bad) {
      parts.push(
        html`<p class="error-summary" role="alert">${errors.form ?? errors.cursor ?? 'Fix the marked fields to search.'}</p>`,
      );
      status = status === 200 ? 400 : status;
    }
    if (client && !bad) {
      const back = listUrl({
        client: r.client,
        tenant: r.tenant,
        channel: r.channel,
        reason: r.reason,
        address: r.address,
        cursor: r.cursor,
      });
      let rows: Suppression[] = [];
      let countLine: Html = html``;
      let next: string | null = null;
      try {
        if (r.address) {
          if (r.tenant) {
            for (const k of keys)
              rows.push(
                ...(
                  await rt.suppressions.list(client.id, r.tenant, {
                    channel: k.channel,
                    address: k.address,
                    ...(reason ? { reason } : {}),
                    limit: 100,
                  })
                ).results,
              );
          } else {
            const found = await findAcrossTenants(rt.db, client.id, keys, reason);
            rows = found.rows;
            if (found.more)
              countLine = html`<p class="count-line" id="entry-count">More than ${ACROSS_TENANTS_SHOWN} entries: the first ${ACROSS_TENANTS_SHOWN} are shown. Choose a tenant to see its own.</p>`;
          }
          if (!countLine.value)
            countLine = html`<p id="entry-count"><strong class="count-line">${rows.length} ${rows.length === 1 ? 'entry' : 'entries'}</strong> in ${r.tenant ? html`tenant <code>${r.tenant}</code>` : 'every tenant of the client'}. Searched as ${keys.map((k, i) => html`${i > 0 ? ', ' : ''}${k.channel} <code>${k.address}</code>`)}.</p>`;
        } else if (r.tenant) {
          const [page, count] = await Promise.all([
            rt.suppressions.list(client.id, r.tenant, {
              ...(channel ? { channel } : {}),
              ...(reason ? { reason } : {}),
              ...(r.cursor ? { cursor: r.cursor } : {}),
              limit: PAGE,
            }),
            countTenant(rt.db, client.id, r.tenant, { channel, reason }),
          ]);
          rows = page.results;
          next = page.next_cursor;
          const filtered = channel || reason ? ' matching the filters' : '';
          countLine = html`<p class="count-line" id="entry-count">${count.atLeast ? `More than ${COUNT_BOUND.toLocaleString('en')} entries` : `${count.n} ${count.n === 1 ? 'entry' : 'entries'}`} in tenant <code>${r.tenant}</code>${filtered}${r.cursor ? ' (a later page)' : ''}.</p>`;
        }
      } catch (e) {
        if (!isHttpError(e) || e.status !== 400) throw e;
        parts.push(
          html`<p class="error-summary" role="alert">The page link is damaged; start the search again.</p>`,
        );
        return sendPage(reply, 400, consolePage(ctx, 'Suppressions', html`${parts}`));
      }
      if (r.tenant || r.address) {
        parts.push(html`<section aria-labelledby="entries-h"><h2 id="entries-h">Entries of ${client.name}</h2>${countLine}${entriesTable(client.id, rows, await liveDeliveries(rows), !r.tenant, back)}
${pager(next, (cursor) => listUrl({ client: r.client, tenant: r.tenant, channel: r.channel, reason: r.reason, cursor }))}</section>`);
      } else {
        parts.push(
          html`<p class="muted" id="choose-tenant">Choose a tenant to list its entries, or type an address to find it in every tenant of ${client.name}.</p>`,
        );
      }
    }
    if (client)
      parts.push(
        addForm(
          ctx.csrf,
          client.id,
          state.add?.values ?? { tenant: r.tenant, channel: channel ?? undefined },
          state.add?.errors ?? {},
          tenants,
        ),
      );
    else if (!r.client)
      parts.push(
        html`<p class="muted" id="choose-client">Choose a client to see its tenants' lists.</p>`,
      );
    return sendPage(reply, status, consolePage(ctx, 'Suppressions', html`${parts}`));
  };

  const rawOf = (q: unknown): Raw =>
    Object.fromEntries(
      (['client', 'tenant', 'channel', 'reason', 'address', 'cursor'] as const).map((k) => [
        k,
        queryValue(q, k),
      ]),
    ) as Raw;

  app.get('/suppressions', async (req, reply) =>
    render(req, reply, { raw: rawOf(req.query), errors: {} }),
  );

  app.post('/suppressions', { preHandler: app.csrfProtection }, async (req, reply) => {
    const b = req.body;
    const clientId = formValue(b, 'client').trim();
    const values: Record<AddField, string> = {
      tenant: formValue(b, 'add_tenant').trim(),
      channel: formValue(b, 'add_channel').trim(),
      address: formValue(b, 'add_address').trim(),
      reason: formValue(b, 'add_reason').trim() || 'manual',
      scope: formValue(b, 'add_scope').trim() || '*',
      note: formValue(b, 'add_note').trim(),
    };
    const errors: Errors<AddField> = {};
    const client = clientId ? await rt.clients.get(clientId) : null;
    if (!client) {
      return render(
        req,
        reply,
        {
          raw: { ...rawOf({}), client: clientId },
          errors: {
            client: 'No client has this id.',
            form: 'Nothing was added: no client has the id given.',
          },
        },
        400,
      );
    }
    if (!values.tenant) errors.tenant = 'Enter the tenant the entry belongs to.';
    else if (!tenantOk(values.tenant))
      errors.tenant = 'A tenant id has no spaces or slashes and at most 200 characters.';
    else if (!(await rt.tenants.get(client.id, values.tenant)))
      errors.tenant = `Client ${client.name} has no tenant with this id.`;
    const tenantKnown = values.tenant !== '' && errors.tenant === undefined;
    const channel = isChannel(values.channel) ? values.channel : null;
    if (!channel) errors.channel = `Choose one of ${CHANNELS.join(', ')}.`;
    let key: string | null = null;
    if (!values.address) errors.address = 'Enter the address to suppress.';
    else if (values.address.length > MAX_ADDRESS)
      errors.address = `Too long: an address has at most ${MAX_ADDRESS} characters.`;
    else if (channel) {
      key = normaliseAddress(channel, values.address);
      if (key === null) errors.address = `Not ${addressWording(channel)}.`;
    }
    if (!isReason(values.reason))
      errors.reason = `Choose one of ${SUPPRESSION_REASONS.join(', ')}.`;
    if (!scopeOk(values.scope))
      errors.scope = 'Enter * or one event type (no spaces, at most 200 characters).';
    if (!values.note)
      errors.note =
        'Say why this address is suppressed: the note is kept with the entry and in the audit log.';
    else if (values.note.length > MAX_NOTE)
      errors.note = `Too long: at most ${MAX_NOTE} characters.`;
    // The list beside the form shows the tenant's entries when the tenant exists.
    const back = { ...rawOf({}), client: client.id, tenant: tenantKnown ? values.tenant : '' };
    if (Object.keys(errors).length > 0 || !channel || key === null) {
      return render(
        req,
        reply,
        {
          raw: back,
          errors: {},
          add: { values, errors: { ...errors, form: 'Nothing was added: fix the marked fields.' } },
        },
        400,
      );
    }
    const reason = values.reason as SuppressionReasonT;
    const who = actorOf(req);
    const written = await inTransaction(rt.db, async (c) => {
      const r = await rt.suppressions.upsert(
        client.id,
        [
          {
            tenant: values.tenant,
            channel,
            address: key!,
            scope: values.scope,
            reason,
            source: 'console',
            detail: values.note,
            createdBy: who.actor,
          },
        ],
        c,
      );
      const entry = r.entries[0];
      if (!entry) return null;
      await deps.audit.write(
        {
          ...who,
          action: 'suppression.add',
          target: `${client.id}/${values.tenant}`,
          detail: {
            client_id: client.id,
            tenant: values.tenant,
            channel,
            address: entry.address,
            scope: entry.scope,
            reason,
            note: values.note,
            created: r.created === 1,
          },
        },
        c,
      );
      return { entry, created: r.created === 1 };
    });
    if (!written) {
      // The upsert keeps a standing entry of another reason rather than let a soft bounce make it
      // lapse.
      return render(
        req,
        reply,
        {
          raw: back,
          errors: {},
          add: {
            values,
            errors: {
              form: `Nothing was added: ${key} already has an entry of another reason for this scope, and a soft bounce does not replace it. Remove that entry first if it is wrong.`,
            },
          },
        },
        409,
      );
    }
    const e = written.entry;
    return redirectWithFlash(
      reply,
      deps,
      listUrl({ client: client.id, tenant: values.tenant, channel, address: e.address }),
      `${written.created ? 'Added' : 'Updated'}: ${e.channel} ${e.address} in tenant ${values.tenant} (${REASON_LABELS[reason]}, ${e.scope === '*' ? 'every event type' : `event type ${e.scope}`}).`,
    );
  });

  /** The entry a remove form names, read back from the list (so the page shows what will go). */
  const findEntry = async (
    clientId: string,
    tenant: string,
    channel: Channel,
    address: string,
    scope: string,
  ): Promise<Suppression | null> => {
    const page = await rt.suppressions.list(clientId, tenant, { channel, address, limit: 1000 });
    return page.results.find((s) => s.scope === scope) ?? null;
  };

  const confirmPage = (
    ctx: PageContext,
    client: ClientRow,
    s: Suppression,
    back: string,
    note: string,
    error?: string,
  ): Html => html`<h1>Remove an entry</h1>
<p><a href="${back}">Back to the list</a></p>
<dl class="facts">
<div><dt>Client</dt><dd>${client.name} <code>${client.id}</code></dd></div>
<div><dt>Tenant</dt><dd><code>${s.tenant}</code></dd></div>
<div><dt>Channel</dt><dd>${s.channel}</dd></div>
<div><dt>Address</dt><dd id="remove-address">${s.address}</dd></div>
<div><dt>Scope</dt><dd>${s.scope === '*' ? 'every event type (*)' : s.scope}</dd></div>
<div><dt>Reason</dt><dd>${reasonBadge(s.reason, REASON_LABELS[s.reason])} from ${s.source}</dd></div>
<div class="wide"><dt>Evidence</dt><dd>${orDash(s.detail)}</dd></div>
<div><dt>Created</dt><dd>${time(s.created_at)}${s.created_by ? ` by ${s.created_by}` : ''}</dd></div>
</dl>
<form id="remove-suppression" method="post" action="/ops/suppressions/remove" class="card" aria-labelledby="remove-h">
<h2 id="remove-h">Remove it</h2>
${csrfField(ctx.csrf)}
${error ? html`<p class="error-summary" role="alert">Nothing was removed: fix the marked field.</p>` : ''}
<p class="warning">Once removed, ENS sends to ${s.address} again${s.scope === '*' ? '' : ` for ${s.scope}`} in this tenant. Remove an entry only when you know the address is good again or the recipient asked to be sent to.</p>
${Object.entries({ client: client.id, tenant: s.tenant, channel: s.channel, address: s.address, scope: s.scope, back }).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
${textareaField({ name: 'note', label: 'Note (why)', value: note, error, required: true, maxLength: MAX_NOTE, hint: 'Kept in the audit log, e.g. "mailbox fixed, confirmed with the customer"' })}
<div class="actions"><button type="submit" class="button danger">Remove entry</button> <a class="button secondary" href="${back}">Cancel</a></div>
</form>`;

  const entryFromForm = async (src: unknown, read: (s: unknown, k: string) => string) => {
    const clientId = read(src, 'client');
    const tenant = read(src, 'tenant');
    const channel = read(src, 'channel');
    const address = read(src, 'address');
    const scope = read(src, 'scope') || '*';
    const back = safeBack(read(src, 'back') || listUrl({ client: clientId, tenant }));
    const client = clientId ? await rt.clients.get(clientId) : null;
    const entry =
      client &&
      tenantOk(tenant) &&
      isChannel(channel) &&
      scopeOk(scope) &&
      address.length <= MAX_ADDRESS
        ? await findEntry(client.id, tenant, channel, address, scope)
        : null;
    return { client, entry, back };
  };

  const noEntry = (req: FastifyRequest, reply: FastifyReply, back: string) =>
    sendPage(
      reply,
      404,
      consolePage(
        pageContext(req, reply, deps, 'suppressions'),
        'No such entry',
        html`<h1>No such entry</h1>
<p>This suppression list has no such entry: it may have been removed already. Nothing was changed.</p><p><a href="${back}">Back to the list</a></p>`,
      ),
    );

  app.get('/suppressions/remove', async (req, reply) => {
    const { client, entry, back } = await entryFromForm(req.query, queryValue);
    if (!client || !entry) return noEntry(req, reply, back);
    const ctx = pageContext(req, reply, deps, 'suppressions');
    return sendPage(
      reply,
      200,
      consolePage(ctx, 'Remove an entry', confirmPage(ctx, client, entry, back, '')),
    );
  });

  app.post('/suppressions/remove', { preHandler: app.csrfProtection }, async (req, reply) => {
    const read = (s: unknown, k: string) => formValue(s, k).trim();
    const { client, entry, back } = await entryFromForm(req.body, read);
    if (!client || !entry) return noEntry(req, reply, back);
    const note = read(req.body, 'note');
    const error = !note
      ? 'Say why this entry is removed: the note is kept in the audit log.'
      : note.length > MAX_NOTE
        ? `Too long: at most ${MAX_NOTE} characters.`
        : undefined;
    if (error) {
      const ctx = pageContext(req, reply, deps, 'suppressions');
      return sendPage(
        reply,
        400,
        consolePage(ctx, 'Remove an entry', confirmPage(ctx, client, entry, back, note, error)),
      );
    }
    const removed = await rt.suppressions.remove(
      client.id,
      entry.tenant,
      entry.channel,
      entry.address,
      entry.scope,
    );
    if (removed.length === 0)
      return redirectWithFlash(
        reply,
        deps,
        back,
        'That entry was already removed: nothing was changed.',
      );
    const r = removed[0]!;
    await deps.audit.write({
      ...actorOf(req),
      action: 'suppression.remove',
      target: `${client.id}/${r.tenant}`,
      detail: {
        client_id: client.id,
        tenant: r.tenant,
        channel: r.channel,
        address: r.address,
        scope: r.scope,
        reason: r.reason,
        source: r.source,
        note,
      },
    });
    return redirectWithFlash(
      reply,
      deps,
      back,
      `Removed: ${r.channel} ${r.address} in tenant ${r.tenant} (${r.scope === '*' ? 'every event type' : `event type ${r.scope}`}). ENS sends to it again.`,
    );
  });
}
