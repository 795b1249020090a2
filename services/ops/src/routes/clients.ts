import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  CHANNELS,
  MAX_SEND_WEIGHT,
  parsePriorityEventTypes,
  parseSendWeight,
  parseTimestamp,
  SchedulingStore,
  SUPPRESSION_REASONS,
  type Channel,
  type ClientRow,
  type ClientSchedule,
  type ConsentPolicy,
  type IssuedClient,
  type SuppressionReasonT,
  type Tenant,
} from '@ens/core';
import { usageTodayOf } from '@ens/core/internal';
import { claimSubmission, newSubmissionId, recordSubmission } from '../form-submissions.ts';
import { listClients, type ClientListRow } from '../queries/clients.ts';
import {
  actorOf,
  formValue,
  pageContext,
  queryValue,
  redirectWithFlash,
  sendPage,
  type ConsoleDeps,
} from '../request-context.ts';
import { loadInternalTraffic } from '../queries/internal-client.ts';
import {
  actionButton,
  checkboxGroup,
  clip,
  field,
  pager,
  query,
  scrollable,
  stacked,
  time,
  totalLine,
  type ListTotal,
} from '../views/components.ts';
import { REASON_LABELS } from '../views/consent-panels.ts';
import { html, raw, type Html } from '../views/html.ts';
import { consolePage, csrfField } from '../views/layout.ts';

const TENANT_PAGE = 50;
const QUOTA_FIELDS = CHANNELS.map((c) => ({ channel: c, name: `quota_${c}` }));

/** Parses a keyset cursor `timestamp|id` from a page link. */
export function parseCursor(v: string): { at: string; id: string } | null {
  const i = v.indexOf('|');
  if (i <= 0) return null;
  // Kept as written: the page's last row's stamp, to the microsecond.
  const at = v.slice(0, i);
  if (parseTimestamp(at, { form: 'strict' }) === null) return null;
  return { at, id: v.slice(i + 1) };
}

function limitsText(
  deps: ConsoleDeps,
  r: { rate_limit: number | null; daily_quota: Record<string, number> },
): { rate: string; quotas: Record<string, string> } {
  const q = (n: number) => (n === 0 ? 'unlimited' : String(n));
  return {
    rate: `${r.rate_limit ?? deps.rt.config.rateLimit}/s${r.rate_limit === null ? ' (default)' : ''}`,
    quotas: Object.fromEntries(
      CHANNELS.map((c) => [
        c,
        `${q(r.daily_quota[c] ?? deps.rt.config.dailyQuota)}${r.daily_quota[c] === undefined ? ' (default)' : ''}`,
      ]),
    ),
  };
}

function createForm(
  csrf: string,
  values: { name: string; callback: boolean },
  error?: string,
): Html {
  return html`<form id="create-client" method="post" action="/ops/clients" class="card" aria-labelledby="create-client-h">
<h2 id="create-client-h">Create client</h2>
${csrfField(csrf)}
<input type="hidden" name="submission" value="${newSubmissionId()}">
${field({ name: 'name', label: 'Name', value: values.name, error, required: true, hint: 'Who uses it, e.g. billing-service' })}
<div class="field checkbox"><input id="f-callback_secret" name="callback_secret" type="checkbox"${values.callback ? raw(' checked') : ''}> <label for="f-callback_secret">Issue a callback secret</label></div>
<div class="actions"><button type="submit" class="button">Create client</button></div>
</form>`;
}

/** Usage against quota in a few characters: ∞ for no quota, * for the deployment's default. */
function compactLimits(
  deps: ConsoleDeps,
  r: { rate_limit: number | null; daily_quota: Record<string, number> },
): { rate: string; quotas: Record<string, string> } {
  const q = (n: number) => (n === 0 ? '∞' : String(n));
  return {
    rate: `${r.rate_limit ?? deps.rt.config.rateLimit}/s${r.rate_limit === null ? '*' : ''}`,
    quotas: Object.fromEntries(
      CHANNELS.map((c) => [
        c,
        `${q(r.daily_quota[c] ?? deps.rt.config.dailyQuota)}${r.daily_quota[c] === undefined ? '*' : ''}`,
      ]),
    ),
  };
}

function clientsTable(deps: ConsoleDeps, rows: ClientListRow[], internalIds: string[]): Html {
  return scrollable(
    'Clients',
    html`<table id="clients">
<caption>Clients, oldest first. Per channel: deliveries today (UTC) / daily quota; ∞ no quota, * the default.</caption>
<thead><tr><th scope="col">Name <span class="sub-h">/ client id</span></th><th scope="col">State</th><th scope="col">Callback secret</th><th scope="col" class="num">Rate limit</th>
${CHANNELS.map((c) => html`<th scope="col" class="num">${c}</th>`)}<th scope="col">Created</th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="${5 + CHANNELS.length}" class="muted">No client yet.</td></tr>` : ''}
${rows.map((r) => {
  const l = compactLimits(deps, r);
  return html`<tr data-client-id="${r.id}"><td>${stacked(html`<a class="clip" href="/ops/clients/${encodeURIComponent(r.id)}" title="${r.name}">${r.name}</a>${internalIds.includes(r.id) ? html` <span class="badge internal">ENS internal</span>` : ''}`, html`<code class="id">${r.id}</code>`)}</td>
<td>${r.disabled ? html`<span class="badge status-failed">disabled</span>` : html`<span class="badge status-sent">active</span>`}</td>
<td>${r.has_callback_secret ? 'yes' : 'no'}</td><td class="num">${l.rate}</td>
${CHANNELS.map((c) => html`<td class="num">${r.usage[c] ?? 0} / ${l.quotas[c]}</td>`)}<td>${time(r.created_at)}</td></tr>`;
})}
</tbody>
</table>`,
  );
}

function secretPage(title: string, issued: IssuedClient, clientName: string | null): Html {
  const item = (id: string, label: string, value: string) => html`<div class="secret">
<dt>${label}</dt>
<dd><code id="${id}">${value}</code> <button type="button" data-copy="${id}">Copy</button></dd>
</div>`;
  return html`<h1>${title} — shown once</h1>
<p class="warning">Copy ${issued.client_secret && issued.callback_secret ? 'these secrets' : 'this secret'} now and store ${issued.client_secret && issued.callback_secret ? 'them' : 'it'} in your secret manager. ENS keeps ${issued.client_secret && issued.callback_secret ? 'only a hash of the client secret and an encrypted copy of the callback secret' : issued.client_secret ? 'only a hash' : 'only an encrypted copy'}, and this page will not show ${issued.client_secret && issued.callback_secret ? 'them' : 'it'} again.</p>
<dl class="secrets">
${clientName ? html`<div class="secret"><dt>Name</dt><dd>${clientName}</dd></div>` : ''}
${item('client-id', 'Client id', issued.client_id)}
${issued.client_secret ? item('client-secret', 'Client secret', issued.client_secret) : ''}
${issued.callback_secret ? item('callback-secret', 'Callback secret', issued.callback_secret) : ''}
</dl>
<p id="copy-status" class="copy-status" role="status" aria-live="polite"></p>
<p><a href="/ops/clients/${encodeURIComponent(issued.client_id)}">Go to the client</a></p>`;
}

type LimitErrors = Partial<Record<string, string>>;

function detailPage(
  deps: ConsoleDeps,
  csrf: string,
  c: ClientRow,
  schedule: ClientSchedule,
  usage: Record<string, number>,
  tenants: Tenant[],
  tenantsNext: string | null,
  tenantsTotal: ListTotal,
  policy: ConsentPolicy,
  form?: { values: Record<string, string>; errors: LimitErrors },
): Html {
  const l = limitsText(deps, {
    rate_limit: c.rateLimit,
    daily_quota: c.dailyQuota as Record<string, number>,
  });
  const v: Record<string, string> = {
    rate: c.rateLimit === null ? '' : String(c.rateLimit),
    ...Object.fromEntries(
      QUOTA_FIELDS.map((q) => [
        q.name,
        c.dailyQuota[q.channel] === undefined ? '' : String(c.dailyQuota[q.channel]),
      ]),
    ),
    weight: String(schedule.weight),
    priority_event_types: schedule.priorityEventTypes.join(', '),
    suppression_reasons: policy.suppression_reasons.join(','),
    bulk_event_types: policy.bulk_event_types.join(', '),
    must_deliver_event_types: policy.must_deliver_event_types.join(', '),
    ...form?.values,
  };
  const e = form?.errors ?? {};
  const id = encodeURIComponent(c.id);
  return html`<h1>Client ${c.name}</h1>
<dl class="facts">
<div><dt>Client id</dt><dd><code>${c.id}</code></dd></div>
<div><dt>State</dt><dd>${c.disabled ? html`<span class="badge status-failed">disabled</span>` : html`<span class="badge status-sent">active</span>`}</dd></div>
<div><dt>Callback secret</dt><dd>${c.callbackSecretEnc ? 'issued' : 'none (no callbacks are posted)'}</dd></div>
<div><dt>Created</dt><dd>${time(c.createdAt)}</dd></div>
</dl>

<section aria-labelledby="actions-h" class="card">
<h2 id="actions-h">Actions</h2>
<div class="button-row">
${actionButton(`/ops/clients/${id}/rotate-secret`, 'Rotate client secret', csrf, { hidden: { submission: newSubmissionId() } })}
${actionButton(`/ops/clients/${id}/callback-secret`, c.callbackSecretEnc ? 'Replace callback secret' : 'Issue callback secret', csrf, { hidden: { submission: newSubmissionId() } })}
${c.disabled ? actionButton(`/ops/clients/${id}/enable`, 'Enable client', csrf) : actionButton(`/ops/clients/${id}/disable`, 'Disable client', csrf, { danger: true })}
${c.disabled ? actionButton(`/ops/clients/${id}/delete`, 'Delete client', csrf, { danger: true }) : ''}
</div>
<p class="muted">Rotating keeps tokens already issued valid until they expire. Disabling cuts off the client's tokens at once; enabling lets its secret mint tokens again. Deleting a disabled client erases its secrets for good; its deliveries, callbacks and suppressions stay until retention removes them.</p>
<p><a href="/ops/deliveries${query({ client: c.id })}">Deliveries of this client</a> · <a href="/ops/dead-letters${query({ client: c.id })}">Dead-letter callbacks of this client</a> · <a href="/ops/suppressions${query({ client: c.id })}">Suppression lists of this client</a></p>
</section>

<section aria-labelledby="usage-h">
<h2 id="usage-h">Usage today and limits</h2>
${scrollable(
  'Usage today and limits',
  html`<table id="usage">
<caption>Deliveries created today (UTC) against the daily quota; 0 or unlimited means no quota</caption>
<thead><tr><th scope="col">Channel</th><th scope="col" class="num">Used today</th><th scope="col">Daily quota</th></tr></thead>
<tbody>${CHANNELS.map((ch) => html`<tr data-channel="${ch}"><th scope="row">${ch}</th><td class="num">${usage[ch] ?? 0}</td><td>${l.quotas[ch]}</td></tr>`)}</tbody>
</table>`,
)}
<p>Request rate limit: ${l.rate}</p>
<form id="limits" method="post" action="/ops/clients/${id}/limits" class="card" aria-labelledby="limits-h">
<h3 id="limits-h">Change limits</h3>
${csrfField(csrf)}
${e.form ? html`<p class="error-summary" role="alert">${e.form}</p>` : ''}
${field({ name: 'rate', label: 'Requests per second', value: v.rate, error: e.rate, hint: `Empty: the default (${deps.rt.config.rateLimit}/s)`, attrs: raw(' inputmode="numeric"') })}
${QUOTA_FIELDS.map((q) => field({ name: q.name, label: `Daily ${q.channel} quota`, value: v[q.name], error: e[q.name], hint: `Empty: the default (${deps.rt.config.dailyQuota === 0 ? 'unlimited' : deps.rt.config.dailyQuota}); 0: unlimited`, attrs: raw(' inputmode="numeric"') }))}
<div class="actions"><button type="submit" class="button">Save limits</button></div>
</form>
</section>

<section aria-labelledby="schedule-h">
<h2 id="schedule-h">Share of the send slots</h2>
<p class="muted">While several clients have deliveries waiting on a channel, each gets sends in proportion to its weight; a client's priority event types go ahead of its other messages, within its own share. Workers apply a change within 5 seconds.</p>
<form id="schedule" method="post" action="/ops/clients/${id}/schedule" class="card" aria-labelledby="schedule-form-h">
<h3 id="schedule-form-h">Change the share</h3>
${csrfField(csrf)}
${e.schedule_form ? html`<p class="error-summary" role="alert">${e.schedule_form}</p>` : ''}
${field({ name: 'weight', label: 'Weight', value: v.weight, error: e.weight, hint: `1 to ${MAX_SEND_WEIGHT}; empty: 1`, attrs: raw(' inputmode="numeric"') })}
${field({ name: 'priority_event_types', label: 'Priority event types', value: v.priority_event_types, error: e.priority_event_types, hint: 'Comma-separated, * for any characters, e.g. otp.*, auth.code; empty: none' })}
<div class="actions"><button type="submit" class="button">Save share</button></div>
</form>
</section>

<section aria-labelledby="tenants-h">
<h2 id="tenants-h">Tenants</h2>
<p class="muted">A tenant's weight is its share of its client's sends while several of the client's tenants have deliveries waiting.</p>
${totalLine({ id: 'tenant-count', total: tenantsTotal, shown: tenants.length, one: 'tenant', many: 'tenants' })}
${scrollable(
  'Tenants',
  html`<table id="tenants">
<caption>Tenants of this client, by id</caption>
<thead><tr><th scope="col">Tenant</th><th scope="col">Name</th><th scope="col">Created</th><th scope="col">Deliveries</th><th scope="col">Suppressions</th><th scope="col">Weight</th></tr></thead>
<tbody>
${tenants.length === 0 ? html`<tr><td colspan="6" class="muted">No tenant.</td></tr>` : ''}
${tenants.map(
  (t) =>
    html`<tr data-tenant="${t.tenant}"><td><code class="clip" title="${t.tenant}">${t.tenant}</code></td><td>${clip(t.name)}</td><td>${time(t.created_at)}</td><td><a href="/ops/deliveries${query({ client: c.id, tenant: t.tenant })}">Search</a></td><td><a href="/ops/suppressions${query({ client: c.id, tenant: t.tenant })}">List<span class="visually-hidden"> the suppressions of tenant ${t.tenant}</span></a></td><td><form class="inline-form" method="post" action="/ops/clients/${id}/tenants/${encodeURIComponent(t.tenant)}/weight">${csrfField(csrf)}<input name="weight" value="${String(schedule.tenantWeights[t.tenant] ?? 1)}" size="3" inputmode="numeric" aria-label="Weight of tenant ${t.tenant}"> <button type="submit" class="button button-small">Save</button></form></td></tr>`,
)}
</tbody>
</table>`,
)}
${pager(tenantsNext, (a) => `/ops/clients/${id}${query({ tenants_after: a })}`)}
</section>

${consentSection(csrf, id, policy, v, e)}`;
}

/** The client's consent policy: what it is, and the form that changes it. */
function consentSection(
  csrf: string,
  id: string,
  policy: ConsentPolicy,
  v: Record<string, string>,
  e: LimitErrors,
): Html {
  const list = (xs: string[], none: string) =>
    xs.length === 0
      ? html`<span class="muted">${none}</span>`
      : html`${xs.map((x, i) => html`${i > 0 ? ', ' : ''}<code>${x}</code>`)}`;
  const checked = (v.suppression_reasons ?? '').split(',').filter(Boolean);
  return html`<section id="consent" aria-labelledby="consent-h">
<h2 id="consent-h">Consent policy</h2>
<p class="muted">Which reasons on this client's suppression lists stop a send; which event types are bulk (sent with one-click unsubscribe headers, and an unsubscribe covers only that event type); and which must reach the recipient despite an email or push opt-out or complaint (a password reset). An sms or whatsapp opt-out (STOP) stops every event type, as carriers require. Sends apply a change at once.</p>
<dl class="facts" id="consent-now">
<div class="wide"><dt>Reasons that stop a send</dt><dd id="policy-reasons">${policy.suppression_reasons.length === 0 ? html`<strong class="error-text">none: the suppression lists stop nothing</strong>` : policy.suppression_reasons.map((r) => REASON_LABELS[r as SuppressionReasonT] ?? r).join(', ')}</dd></div>
<div><dt>Bulk event types</dt><dd id="policy-bulk">${list(policy.bulk_event_types, 'none')}</dd></div>
<div><dt>Must-deliver event types</dt><dd id="policy-must-deliver">${list(policy.must_deliver_event_types, 'none')}</dd></div>
</dl>
<form id="consent-policy" method="post" action="/ops/clients/${id}/consent" class="card" aria-labelledby="consent-form-h">
<h3 id="consent-form-h">Change the consent policy</h3>
${csrfField(csrf)}
<input type="hidden" name="reasons_shown" value="1">
${e.consent_form ? html`<p class="error-summary" role="alert">${e.consent_form}</p>` : ''}
${checkboxGroup({ name: 'reason', legend: 'Reasons that stop a send', options: SUPPRESSION_REASONS.map((r) => ({ value: r, label: REASON_LABELS[r] })), checked, error: e.suppression_reasons })}
${field({ name: 'bulk_event_types', label: 'Bulk event types', value: v.bulk_event_types, error: e.bulk_event_types, hint: 'Comma-separated exact event types, e.g. newsletter.weekly, promo; empty: none' })}
${field({ name: 'must_deliver_event_types', label: 'Must-deliver event types', value: v.must_deliver_event_types, error: e.must_deliver_event_types, hint: 'Comma-separated exact event types, e.g. password.reset; empty: none' })}
<div class="actions"><button type="submit" class="button">Save consent policy</button></div>
</form>
</section>`;
}

const MAX_POLICY_TYPES = 100;

function eventTypeList(
  text: string,
): { ok: true; value: string[] } | { ok: false; message: string } {
  const list = [
    ...new Set(
      text
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean),
    ),
  ];
  const bad = list.find((p) => p.length > 200 || /\s/.test(p) || p.includes('*'));
  if (bad !== undefined)
    return {
      ok: false,
      message: `an event type here is exact: no spaces, no *, at most 200 characters; "${bad.slice(0, 60)}" is not one`,
    };
  if (list.length > MAX_POLICY_TYPES)
    return { ok: false, message: `at most ${MAX_POLICY_TYPES} event types` };
  return { ok: true, value: list };
}

/**
 * Checks the consent policy form: reasons from the known list, exact event types, none both bulk
 * and must-deliver.
 */
export function parseConsentPolicy(body: unknown): {
  values: Record<string, string>;
  errors: LimitErrors;
  policy: ConsentPolicy | null;
} {
  const reasons = SUPPRESSION_REASONS.filter((r) => formValue(body, `reason_${r}`) !== '');
  const values = {
    suppression_reasons: reasons.join(','),
    bulk_event_types: formValue(body, 'bulk_event_types').trim(),
    must_deliver_event_types: formValue(body, 'must_deliver_event_types').trim(),
  };
  const errors: LimitErrors = {};
  if (formValue(body, 'reasons_shown') !== '1')
    errors.suppression_reasons = 'The form is damaged: reload the page and try again.';
  const bulk = eventTypeList(values.bulk_event_types);
  const must = eventTypeList(values.must_deliver_event_types);
  if (!bulk.ok) errors.bulk_event_types = `Enter event types separated by commas: ${bulk.message}.`;
  if (!must.ok)
    errors.must_deliver_event_types = `Enter event types separated by commas: ${must.message}.`;
  if (bulk.ok && must.ok) {
    const both = bulk.value.filter((t) => must.value.includes(t));
    if (both.length > 0)
      errors.must_deliver_event_types = `${both.join(', ')} cannot be both bulk and must-deliver: an unsubscribe from it would be ignored.`;
  }
  if (Object.keys(errors).length > 0 || !bulk.ok || !must.ok)
    return {
      values,
      errors: {
        ...errors,
        consent_form: 'The consent policy was not saved: fix the marked fields.',
      },
      policy: null,
    };
  return {
    values,
    errors,
    policy: {
      suppression_reasons: reasons,
      bulk_event_types: bulk.value,
      must_deliver_event_types: must.value,
    },
  };
}

/** Checks the limits form: each value empty (the default) or a whole number in range. */
export function parseLimits(body: unknown): {
  values: Record<string, string>;
  errors: LimitErrors;
  limits: { rateLimit: number | null; dailyQuota: Partial<Record<Channel, number | null>> };
} {
  const values: Record<string, string> = { rate: formValue(body, 'rate').trim() };
  const errors: LimitErrors = {};
  let rateLimit: number | null = null;
  if (values.rate) {
    if (!/^\d{1,9}$/.test(values.rate) || Number(values.rate) < 1)
      errors.rate =
        'Enter a whole number of requests per second, 1 or more, or leave it empty for the default.';
    else rateLimit = Number(values.rate);
  }
  const dailyQuota: Partial<Record<Channel, number | null>> = {};
  for (const q of QUOTA_FIELDS) {
    const v = formValue(body, q.name).trim();
    values[q.name] = v;
    if (!v) dailyQuota[q.channel] = null;
    else if (!/^\d{1,9}$/.test(v))
      errors[q.name] =
        'Enter a whole number of messages (0 for unlimited), or leave it empty for the default.';
    else dailyQuota[q.channel] = Number(v);
  }
  return { values, errors, limits: { rateLimit, dailyQuota } };
}

export function clientRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { rt } = deps;
  const scheduling = new SchedulingStore(rt.db);

  const renderList = async (
    req: FastifyRequest,
    reply: FastifyReply,
    status: number,
    form: { name: string; callback: boolean },
    error?: string,
  ) => {
    const after = parseCursor(queryValue(req.query, 'after'));
    const [{ rows, next, total }, internal] = await Promise.all([
      listClients(rt.db, after),
      loadInternalTraffic(rt.db),
    ]);
    const ctx = pageContext(req, reply, deps, 'clients');
    return sendPage(
      reply,
      status,
      consolePage(
        ctx,
        'Clients',
        html`<h1>Clients</h1>
${error ? html`<p class="error-summary" role="alert">The client was not created: fix the marked field.</p>` : ''}
${createForm(ctx.csrf, form, error)}
<p class="count-line" id="client-count">${total.toLocaleString('en')} ${total === 1 ? 'client' : 'clients'}.</p>
${clientsTable(deps, rows, internal.clientIds)}
${pager(next, (a) => `/ops/clients${query({ after: a })}`)}`,
      ),
    );
  };

  const renderDetail = async (
    req: FastifyRequest,
    reply: FastifyReply,
    id: string,
    status: number,
    form?: { values: Record<string, string>; errors: LimitErrors },
  ) => {
    const ctx = pageContext(req, reply, deps, 'clients');
    const c = await rt.clients.get(id);
    if (!c)
      return sendPage(
        reply,
        404,
        consolePage(
          ctx,
          'Client not found',
          html`<h1>Client not found</h1><p>No client has the id <code>${id}</code>.</p><p><a href="/ops/clients">All clients</a></p>`,
        ),
      );
    const tenantsAfter = queryValue(req.query, 'tenants_after') || undefined;
    const [usage, tenants, tenantsTotal, schedule, policy] = await Promise.all([
      usageTodayOf(rt.db, [id]).then((m) => m.get(id) ?? {}),
      rt.tenants.list(id, { after: tenantsAfter, limit: TENANT_PAGE + 1 }),
      rt.tenants.count(id),
      scheduling.get(id),
      rt.suppressions.policy(id),
    ]);
    const page = tenants.slice(0, TENANT_PAGE);
    const next = tenants.length > TENANT_PAGE ? page[page.length - 1]!.tenant : null;
    return sendPage(
      reply,
      status,
      consolePage(
        ctx,
        `Client ${c.name}`,
        detailPage(
          deps,
          ctx.csrf,
          c,
          schedule ?? { weight: 1, priorityEventTypes: [], tenantWeights: {} },
          usage,
          page,
          next,
          tenantsTotal,
          policy ?? { suppression_reasons: [], bulk_event_types: [], must_deliver_event_types: [] },
          form,
        ),
      ),
    );
  };

  /**
   * A form already acted on (a reload of the secret page): back to the client, no secret, nothing
   * done again.
   */
  const alreadyDone = (reply: FastifyReply, clientId: string | null) =>
    redirectWithFlash(
      reply,
      deps,
      clientId ? `/ops/clients/${encodeURIComponent(clientId)}` : '/ops/clients',
      'That form was already submitted: nothing was done again, and the secrets it produced ' +
        'were shown once only. Rotate the secret if it was not copied.',
    );

  const showSecret = (
    req: FastifyRequest,
    reply: FastifyReply,
    title: string,
    issued: IssuedClient,
    name: string | null,
  ) => {
    const ctx = pageContext(req, reply, deps, 'clients');
    return sendPage(
      reply.header('pragma', 'no-cache'),
      200,
      consolePage(ctx, title, secretPage(title, issued, name)),
    );
  };

  app.get('/clients', async (req, reply) =>
    renderList(req, reply, 200, { name: '', callback: false }),
  );

  app.post('/clients', { preHandler: app.csrfProtection }, async (req, reply) => {
    const name = formValue(req.body, 'name').trim();
    const callback = formValue(req.body, 'callback_secret') !== '';
    let error: string | undefined;
    if (!name) error = 'Enter a name for the client.';
    else if (name.length > 200) error = 'Use at most 200 characters.';
    if (error) return renderList(req, reply, 400, { name, callback }, error);
    const submission = formValue(req.body, 'submission');
    const claim = await claimSubmission(rt.db, submission);
    if (!claim.fresh) return alreadyDone(reply, claim.result);
    const issued = await rt.clients.create(name, callback);
    await recordSubmission(rt.db, submission, issued.client_id);
    await deps.audit.write({
      ...actorOf(req),
      action: 'client.create',
      target: issued.client_id,
      detail: { name, callback_secret: callback },
    });
    return showSecret(req, reply, 'New client credentials', issued, name);
  });

  app.get<{ Params: { id: string } }>('/clients/:id', async (req, reply) =>
    renderDetail(req, reply, req.params.id, 200),
  );

  const notFound = (req: FastifyRequest, reply: FastifyReply, id: string) =>
    sendPage(
      reply,
      404,
      consolePage(
        pageContext(req, reply, deps, 'clients'),
        'Client not found',
        html`<h1>Client not found</h1><p>No client has the id <code>${id}</code>.</p>`,
      ),
    );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/rotate-secret',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const claim = await claimSubmission(rt.db, formValue(req.body, 'submission'));
      if (!claim.fresh) return alreadyDone(reply, req.params.id);
      const issued = await rt.clients.rotateSecret(req.params.id);
      if (!issued) return notFound(req, reply, req.params.id);
      await deps.audit.write({
        ...actorOf(req),
        action: 'client.rotate_secret',
        target: req.params.id,
      });
      return showSecret(req, reply, 'New client secret', issued, null);
    },
  );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/callback-secret',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const claim = await claimSubmission(rt.db, formValue(req.body, 'submission'));
      if (!claim.fresh) return alreadyDone(reply, req.params.id);
      const issued = await rt.clients.issueCallbackSecret(req.params.id);
      if (!issued) return notFound(req, reply, req.params.id);
      await deps.audit.write({
        ...actorOf(req),
        action: 'client.issue_callback_secret',
        target: req.params.id,
      });
      return showSecret(req, reply, 'New callback secret', issued, null);
    },
  );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/disable',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      if (!(await rt.clients.disable(req.params.id))) return notFound(req, reply, req.params.id);
      await deps.audit.write({ ...actorOf(req), action: 'client.disable', target: req.params.id });
      return redirectWithFlash(
        reply,
        deps,
        `/ops/clients/${encodeURIComponent(req.params.id)}`,
        'Client disabled: its tokens no longer work.',
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/enable',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      if (!(await rt.clients.enable(req.params.id))) return notFound(req, reply, req.params.id);
      await deps.audit.write({ ...actorOf(req), action: 'client.enable', target: req.params.id });
      return redirectWithFlash(
        reply,
        deps,
        `/ops/clients/${encodeURIComponent(req.params.id)}`,
        'Client enabled: its secret mints tokens again.',
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/delete',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const done = await rt.clients.delete(req.params.id);
      if (done === 'unknown') return notFound(req, reply, req.params.id);
      if (done === 'active')
        return redirectWithFlash(
          reply,
          deps,
          `/ops/clients/${encodeURIComponent(req.params.id)}`,
          'The client is active: disable it before deleting it.',
        );
      await deps.audit.write({ ...actorOf(req), action: 'client.delete', target: req.params.id });
      return redirectWithFlash(
        reply,
        deps,
        '/ops/clients',
        `Client ${req.params.id} deleted: its secrets are erased; its records stay until retention removes them.`,
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/limits',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const { values, errors, limits } = parseLimits(req.body);
      if (Object.keys(errors).length > 0)
        return renderDetail(req, reply, req.params.id, 400, {
          values,
          errors: { ...errors, form: 'The limits were not saved: fix the marked fields.' },
        });
      if (!(await rt.clients.setLimits(req.params.id, limits)))
        return notFound(req, reply, req.params.id);
      await deps.audit.write({
        ...actorOf(req),
        action: 'client.limits',
        target: req.params.id,
        detail: { rate_limit: limits.rateLimit, daily_quota: limits.dailyQuota },
      });
      return redirectWithFlash(
        reply,
        deps,
        `/ops/clients/${encodeURIComponent(req.params.id)}`,
        'Limits saved.',
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/schedule',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const values = {
        weight: formValue(req.body, 'weight'),
        priority_event_types: formValue(req.body, 'priority_event_types'),
      };
      const weight = parseSendWeight(values.weight);
      const types = parsePriorityEventTypes(values.priority_event_types);
      if (!weight.ok || !types.ok) {
        const errors: LimitErrors = {
          schedule_form: 'The share was not saved: fix the marked fields.',
        };
        if (!weight.ok) errors.weight = `Enter ${weight.message}.`;
        if (!types.ok)
          errors.priority_event_types = `Enter event types separated by commas: ${types.message}.`;
        return renderDetail(req, reply, req.params.id, 400, { values, errors });
      }
      if (
        !(await scheduling.setClient(req.params.id, {
          weight: weight.value,
          priorityEventTypes: types.value,
        }))
      )
        return notFound(req, reply, req.params.id);
      await deps.audit.write({
        ...actorOf(req),
        action: 'client.schedule',
        target: req.params.id,
        detail: { weight: weight.value, priority_event_types: types.value },
      });
      return redirectWithFlash(
        reply,
        deps,
        `/ops/clients/${encodeURIComponent(req.params.id)}`,
        'Share saved: workers apply it within 5 seconds.',
      );
    },
  );

  app.post<{ Params: { id: string; tenant: string } }>(
    '/clients/:id/tenants/:tenant/weight',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const { id, tenant } = req.params;
      const weight = parseSendWeight(formValue(req.body, 'weight'));
      if (!weight.ok)
        return renderDetail(req, reply, id, 400, {
          values: {},
          errors: {
            schedule_form: `The weight of tenant ${tenant} was not saved: ${weight.message}.`,
          },
        });
      if (!(await scheduling.setTenant(id, tenant, weight.value))) return notFound(req, reply, id);
      await deps.audit.write({
        ...actorOf(req),
        action: 'tenant.weight',
        target: `${id}/${tenant}`,
        detail: { weight: weight.value },
      });
      return redirectWithFlash(
        reply,
        deps,
        `/ops/clients/${encodeURIComponent(id)}`,
        `Weight of tenant ${tenant} saved.`,
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/clients/:id/consent',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const { values, errors, policy } = parseConsentPolicy(req.body);
      if (!policy) return renderDetail(req, reply, req.params.id, 400, { values, errors });
      const before = await rt.suppressions.policy(req.params.id);
      if (!before) return notFound(req, reply, req.params.id);
      const after = await rt.suppressions.setPolicy(req.params.id, policy);
      if (!after) return notFound(req, reply, req.params.id);
      await deps.audit.write({
        ...actorOf(req),
        action: 'client.consent_policy',
        target: req.params.id,
        detail: { before, after },
      });
      return redirectWithFlash(
        reply,
        deps,
        `/ops/clients/${encodeURIComponent(req.params.id)}#consent`,
        'Consent policy saved: sends apply it at once.',
      );
    },
  );
}
