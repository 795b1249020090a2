import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkOutboundUrl, planDeliveries } from '@ens/core';
import {
  AlertStore,
  type AlertRule,
  type FiringRow,
  type NewAlertRule,
} from '../alerts/alert-store.ts';
import { alertEmail, sendTestNotice } from '../alerts/notify.ts';
import { checkRuleMatches, checkRulesMatch } from '../alerts/rule-match.ts';
import { FIRING_SQL, type FiringAlert } from '../queries/summary.ts';
import {
  actorOf,
  formValue,
  pageContext,
  queryValue,
  redirectWithFlash,
  sendPage,
  type ConsoleDeps,
} from '../request-context.ts';
import {
  actionButton,
  clamp,
  clip,
  field,
  orDash,
  pager,
  percent,
  scrollable,
  selectField,
  stacked,
  time,
  totalLine,
} from '../views/components.ts';
import { html, type Html } from '../views/html.ts';
import { consolePage, csrfField } from '../views/layout.ts';
import { firingTable } from './dashboard.ts';

const PAGE = 50;
type Values = Record<
  | 'name'
  | 'scope'
  | 'value'
  | 'window_minutes'
  | 'min_volume'
  | 'threshold_percent'
  | 'destination',
  string
>;
type Errors = Partial<Record<keyof Values, string>>;

const EMPTY: Values = {
  name: '',
  scope: 'event_type',
  value: '',
  window_minutes: '15',
  min_volume: '20',
  threshold_percent: '10',
  destination: '',
};

/** Checks the new-rule form; every problem is reported beside its field. */
export function parseRule(
  body: unknown,
  maxRecipients: number,
  allowPrivate = false,
): { values: Values; errors: Errors; rule: NewAlertRule | null } {
  const values = Object.fromEntries(
    Object.keys(EMPTY).map((k) => [k, formValue(body, k).trim()]),
  ) as Values;
  const errors: Errors = {};
  if (!values.name) errors.name = 'Give the rule a name.';
  else if (values.name.length > 200) errors.name = 'Use at most 200 characters.';
  if (values.scope !== 'event_type' && values.scope !== 'tenant')
    errors.scope = 'Choose event type or tenant.';
  if (!values.value) errors.value = 'Enter the event type or tenant to watch.';
  else if (values.value.length > 200) errors.value = 'Use at most 200 characters.';
  const int = (k: 'window_minutes' | 'min_volume', min: number, max: number, msg: string) => {
    if (!/^\d{1,6}$/.test(values[k]) || Number(values[k]) < min || Number(values[k]) > max)
      errors[k] = msg;
  };
  int('window_minutes', 1, 1440, 'Enter a whole number of minutes from 1 to 1440.');
  int('min_volume', 1, 1_000_000, 'Enter a whole number of deliveries, 1 or more.');
  const t = Number(values.threshold_percent);
  if (!/^\d{1,3}(\.\d{1,2})?$/.test(values.threshold_percent) || !(t > 0 && t <= 100))
    errors.threshold_percent = 'Enter a percentage above 0 and at most 100, such as 5 or 12.5.';
  let kind: 'email' | 'webhook' = 'email';
  if (!values.destination)
    errors.destination = 'Enter an email address or a webhook URL (https://…).';
  else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(values.destination)) {
    kind = 'webhook';
    let u: URL | null = null;
    try {
      u = new URL(values.destination);
    } catch {
      u = null;
    }
    if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:'))
      errors.destination = 'A webhook URL must start with https:// (or http://).';
    else {
      // ENS posts to it: the outbound guard's rules hold from the moment it is saved.
      const checked = checkOutboundUrl(values.destination, { allowPrivate });
      if (!checked.ok)
        errors.destination = `This webhook URL cannot be used: it ${checked.detail}.`;
    }
  } else {
    // The same rules the API applies to an email recipient.
    try {
      planDeliveries(
        alertEmail(
          {
            firingId: '0',
            rule: {
              id: '0',
              name: 'x',
              scope: 'event_type',
              value: 'x',
              window_minutes: 1,
              min_volume: 1,
              threshold_percent: 1,
            },
            startedAt: '',
            total: 0,
            failed: 0,
            ratePercent: 0,
            consoleUrl: '',
          },
          values.destination,
        ),
        { maxRecipients },
      );
    } catch {
      errors.destination = 'This is neither a valid email address nor a webhook URL.';
    }
  }
  if (Object.keys(errors).length > 0) return { values, errors, rule: null };
  return {
    values,
    errors,
    rule: {
      name: values.name,
      scope: values.scope as 'event_type' | 'tenant',
      value: values.value,
      window_minutes: Number(values.window_minutes),
      min_volume: Number(values.min_volume),
      threshold_percent: t,
      destination_kind: kind,
      destination: values.destination,
    },
  };
}

const MUTE_CHOICES = [
  { value: '60', label: '1 hour' },
  { value: '480', label: '8 hours' },
  { value: '1440', label: '24 hours' },
  { value: '10080', label: '7 days' },
  { value: 'forever', label: 'until unmuted' },
];

/**
 * A rule that fires says so; one whose event type or tenant matches nothing is "no data" in a
 * neutral badge (a green "ok" claimed health for a misspelt rule that can never fire); else "ok".
 */
function ruleState(r: AlertRule, noData?: string): Html {
  const firing = r.firing_since
    ? html`<span class="badge status-failed">firing</span> since ${time(r.firing_since)}`
    : noData
      ? html`<span class="badge neutral" title="${noData}">no data</span><span class="sub">matches nothing yet</span>`
      : html`<span class="badge status-sent">ok</span>`;
  const muted = r.muted
    ? html` <span class="badge status-pending" title="${r.muted_by ? `by ${r.muted_by}` : ''}">muted${r.muted_until ? html` until ${time(r.muted_until)}` : ''}</span>`
    : '';
  return html`${firing}${muted}`;
}

function muteButton(r: AlertRule, csrf: string): Html {
  return r.muted
    ? actionButton(`/ops/alerts/${r.id}/unmute`, 'Unmute', csrf)
    : actionButton(`/ops/alerts/${r.id}/mute`, 'Mute 1 h', csrf, { hidden: { for: '60' } });
}

function rulesTable(rules: AlertRule[], csrf: string, noData: Map<string, string>): Html {
  return scrollable(
    'Alert rules',
    html`<table id="alert-rules">
<caption>Alert rules</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Watches</th><th scope="col">Fires when</th><th scope="col">Notifies</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${rules.length === 0 ? html`<tr><td colspan="6" class="muted">No rule yet.</td></tr>` : ''}
${rules.map(
  (
    r,
  ) => html`<tr data-rule-id="${r.id}"><td><a class="clip" href="/ops/alerts/${r.id}" title="${r.name}">${r.name}</a></td><td>${stacked(clip(r.value), r.scope === 'event_type' ? 'event type' : 'tenant')}</td>
<td>≥ ${percent(r.threshold_percent)} failed<span class="sub">over ${r.window_minutes} min, ≥ ${r.min_volume} ended</span></td>
<td>${stacked(clip(r.destination), r.destination_kind)}</td>
<td>${ruleState(r, noData.get(r.id))}</td>
<td class="actions-cell"><a class="button secondary button-small" href="/ops/alerts/${r.id}">Edit</a> ${actionButton(`/ops/alerts/${r.id}/test`, 'Test', csrf, { secondary: true })} ${muteButton(r, csrf)}</td></tr>`,
)}
</tbody>
</table>`,
  );
}

function firingsTable(rows: FiringRow[]): Html {
  return scrollable(
    'Alert history',
    html`<table id="alert-firings">
<caption>Firings, newest first</caption>
<thead><tr><th scope="col">Rule</th><th scope="col">Started</th><th scope="col">Resolved</th><th scope="col" class="num">Ended / failed</th><th scope="col" class="num">Rate</th><th scope="col">Notified</th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="6" class="muted">No rule has fired.</td></tr>` : ''}
${rows.map(
  (
    f,
  ) => html`<tr data-firing-id="${f.id}"><td>${clip(f.rule_name)}</td><td>${time(f.started_at)}</td><td>${f.resolved_at ? time(f.resolved_at) : html`<span class="badge status-failed">firing</span>`}</td>
<td class="num">${f.total} / ${f.failed}</td><td class="num">${percent(f.rate_percent)}</td>
<td>${f.notified_at ? time(f.notified_at) : f.notify_error ? html`<span class="error-text">${clamp(`failed: ${f.notify_error}`)}</span>` : orDash(null)}</td></tr>`,
)}
</tbody>
</table>`,
  );
}

function ruleForm(csrf: string, v: Values, e: Errors, editing?: AlertRule): Html {
  const id = editing ? 'edit-alert' : 'create-alert';
  return html`<form id="${id}" method="post" action="${editing ? `/ops/alerts/${editing.id}` : '/ops/alerts'}" class="card form-grid" aria-labelledby="${id}-h">
<h2 id="${id}-h">${editing ? 'Change the rule' : 'New rule'}</h2>
${csrfField(csrf)}
${Object.keys(e).length > 0 ? html`<p class="error-summary" role="alert">The rule was not ${editing ? 'saved' : 'created'}: fix the marked fields.</p>` : ''}
${field({ name: 'name', label: 'Name', value: v.name, error: e.name, required: true })}
${selectField({
  name: 'scope',
  label: 'Watch',
  value: v.scope,
  error: e.scope,
  options: [
    { value: 'event_type', label: 'an event type' },
    { value: 'tenant', label: 'a tenant' },
  ],
})}
${field({ name: 'value', label: 'Event type or tenant', value: v.value, error: e.value, required: true })}
${field({ name: 'window_minutes', label: 'Window (minutes)', value: v.window_minutes, error: e.window_minutes, type: 'number' })}
${field({ name: 'min_volume', label: 'Minimum ended deliveries', value: v.min_volume, error: e.min_volume, type: 'number', hint: 'Below this, the rule does not fire' })}
${field({ name: 'threshold_percent', label: 'Failure threshold (%)', value: v.threshold_percent, error: e.threshold_percent, hint: 'Fires at or above this share of failed deliveries' })}
${field({ name: 'destination', label: 'Notify', value: v.destination, error: e.destination, required: true, hint: "An email address (sent through ENS's email channel) or a webhook URL (JSON POST)" })}
<div class="actions"><button type="submit" class="button">${editing ? 'Save rule' : 'Create rule'}</button></div>
</form>`;
}

const RULE_ID = /^\d{1,18}$/;

function valuesOf(r: AlertRule): Values {
  return {
    name: r.name,
    scope: r.scope,
    value: r.value,
    window_minutes: String(r.window_minutes),
    min_volume: String(r.min_volume),
    threshold_percent: String(r.threshold_percent),
    destination: r.destination,
  };
}

function rulePage(r: AlertRule, csrf: string, v: Values, e: Errors): Html {
  return html`<h1>Alert rule ${r.name}</h1>
<p><a href="/ops/alerts">All alert rules</a></p>
<dl class="facts">
<div><dt>State</dt><dd id="rule-state">${ruleState(r)}</dd></div>
<div><dt>Created</dt><dd>${time(r.created_at)} by ${r.created_by}</dd></div>
<div><dt>Last changed</dt><dd>${r.updated_at ? html`${time(r.updated_at)} by ${r.updated_by ?? '—'}` : html`<span class="muted">never</span>`}</dd></div>
</dl>
<section class="card" aria-labelledby="rule-actions-h">
<h2 id="rule-actions-h">Mute, test, delete</h2>
<p class="muted">A muted rule is still evaluated and shows when it fires, but notifies nobody until the mute ends; a firing still open then is notified. A test sends the destination a notice that says it is a test.</p>
<div class="button-row">
${
  r.muted
    ? actionButton(`/ops/alerts/${r.id}/unmute`, 'Unmute', csrf)
    : html`<form method="post" action="/ops/alerts/${r.id}/mute" class="inline-form">${csrfField(csrf)}
<label for="mute-for">Mute for</label> <select id="mute-for" name="for">${MUTE_CHOICES.map((c) => html`<option value="${c.value}">${c.label}</option>`)}</select>
<button type="submit" class="button secondary">Mute</button></form>`
}
${actionButton(`/ops/alerts/${r.id}/test`, 'Send a test notification', csrf, { secondary: true })}
${actionButton(`/ops/alerts/${r.id}/delete`, 'Delete rule', csrf, { danger: true })}
</div>
</section>
${ruleForm(csrf, v, e, r)}`;
}

export function alertRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const store = new AlertStore(deps.rt.db);
  /** An id that names no rule (deleted meanwhile, or never one): back to the list, saying so. */
  const noSuchRule = (reply: FastifyReply, what = 'That rule does not exist (deleted?).') =>
    redirectWithFlash(reply, deps, '/ops/alerts', what);

  const render = async (
    req: FastifyRequest,
    reply: FastifyReply,
    status: number,
    values: Values,
    errors: Errors,
  ) => {
    const after = queryValue(req.query, 'after');
    const before = queryValue(req.query, 'firings_before');
    const [rules, firings, firing, ruleCount, firingCount] = await Promise.all([
      store.rules({ after: RULE_ID.test(after) ? after : undefined, limit: PAGE + 1 }),
      store.firings({ before: RULE_ID.test(before) ? before : undefined, limit: PAGE + 1 }),
      deps.rt.db.query<FiringAlert>(FIRING_SQL),
      store.ruleCount(),
      store.firingCount(),
    ]);
    const rulesPage = rules.slice(0, PAGE);
    // The rules not firing are checked for anything to watch, all of the page's at once.
    const quiet = rulesPage.filter((r) => !r.firing_since);
    const noData = new Map<string, string>();
    (await checkRulesMatch(deps.rt.db, quiet)).forEach((m, i) => {
      if (m.matches === false) noData.set(quiet[i]!.id, m.warning);
    });
    const firingsPage = firings.slice(0, PAGE);
    const ctx = pageContext(req, reply, deps, 'alerts');
    return sendPage(
      reply,
      status,
      consolePage(
        ctx,
        'Alerts',
        html`<h1>Alerts</h1>
<p>Rules on the failure rate of an event type or a tenant. They are checked every 30 seconds; a firing rule notifies its destination once, unless it is muted.</p>
<section id="alerts-firing" aria-labelledby="firing-h">
<h2 id="firing-h">Firing now</h2>
${firing.rows.length > 0 ? totalLine({ id: 'firing-count', total: { n: firing.rows.length, atLeast: false }, shown: firing.rows.length, one: 'rule fires', many: 'rules fire' }) : ''}
${firingTable(firing.rows)}
</section>
<section aria-labelledby="rules-h">
<h2 id="rules-h">Rules</h2>
${totalLine({ id: 'rule-count', total: ruleCount, shown: rulesPage.length, one: 'rule', many: 'rules' })}
${rulesTable(rulesPage, ctx.csrf, noData)}
${pager(rules.length > PAGE ? rulesPage[rulesPage.length - 1]!.id : null, (a) => `/ops/alerts?after=${a}`)}
${ruleForm(ctx.csrf, values, errors)}
</section>
<section aria-labelledby="firings-h">
<h2 id="firings-h">History</h2>
${totalLine({ id: 'firings-count', total: firingCount, shown: firingsPage.length, one: 'firing', many: 'firings' })}
${firingsTable(firingsPage)}
${pager(firings.length > PAGE ? firingsPage[firingsPage.length - 1]!.id : null, (a) => `/ops/alerts?firings_before=${a}`)}
</section>`,
      ),
    );
  };

  const renderRule = async (
    req: FastifyRequest,
    reply: FastifyReply,
    id: string,
    status: number,
    form?: { values: Values; errors: Errors },
  ) => {
    const ctx = pageContext(req, reply, deps, 'alerts');
    const rule = RULE_ID.test(id) ? await store.rule(id) : null;
    if (!rule)
      return sendPage(
        reply,
        404,
        consolePage(
          ctx,
          'Rule not found',
          html`<h1>Alert rule not found</h1><p>It was deleted, or the link is damaged.</p><p><a href="/ops/alerts">All alert rules</a></p>`,
        ),
      );
    return sendPage(
      reply,
      status,
      consolePage(
        ctx,
        `Alert rule ${rule.name}`,
        rulePage(rule, ctx.csrf, form?.values ?? valuesOf(rule), form?.errors ?? {}),
      ),
    );
  };

  /** The flash after a save: a rule that matches nothing is saved, and flagged. */
  const savedMessage = async (verb: string, rule: NewAlertRule) => {
    const m = await checkRuleMatches(deps.rt.db, rule.scope, rule.value);
    return m.matches === true
      ? `Rule "${rule.name}" ${verb}.`
      : `Rule "${rule.name}" ${verb}, but ${m.warning}.`;
  };

  const parse = (req: FastifyRequest) =>
    parseRule(req.body, deps.rt.config.maxRecipients, deps.rt.config.allowPrivateCallbacks);

  app.get('/alerts', async (req, reply) => render(req, reply, 200, EMPTY, {}));

  app.post('/alerts', { preHandler: app.csrfProtection }, async (req, reply) => {
    const { values, errors, rule } = parse(req);
    if (!rule) return render(req, reply, 400, values, errors);
    const who = actorOf(req);
    const created = await store.create(rule, who.actor);
    await deps.audit.write({
      ...who,
      action: 'alert_rule.create',
      target: created.id,
      detail: { ...rule },
    });
    return redirectWithFlash(reply, deps, '/ops/alerts', await savedMessage('created', rule));
  });

  app.get<{ Params: { id: string } }>('/alerts/:id', async (req, reply) =>
    renderRule(req, reply, req.params.id, 200),
  );

  app.post<{ Params: { id: string } }>(
    '/alerts/:id',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const { values, errors, rule } = parse(req);
      if (!rule) return renderRule(req, reply, req.params.id, 400, { values, errors });
      const who = actorOf(req);
      const changed = RULE_ID.test(req.params.id)
        ? await store.update(req.params.id, rule, who.actor)
        : null;
      if (!changed)
        return noSuchRule(reply, 'That rule does not exist (deleted?); nothing was saved.');
      const before = valuesOf(changed.before) as Record<string, string>;
      const after = valuesOf(changed.after) as Record<string, string>;
      const diff = Object.fromEntries(
        Object.keys(after)
          .filter((k) => before[k] !== after[k])
          .map((k) => [k, { from: before[k], to: after[k] }]),
      );
      await deps.audit.write({
        ...who,
        action: 'alert_rule.update',
        target: req.params.id,
        detail: diff,
      });
      return redirectWithFlash(
        reply,
        deps,
        `/ops/alerts/${req.params.id}`,
        await savedMessage('saved', rule),
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/alerts/:id/mute',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const choice = formValue(req.body, 'for');
      if (!MUTE_CHOICES.some((c) => c.value === choice))
        return redirectWithFlash(
          reply,
          deps,
          `/ops/alerts/${req.params.id}`,
          'Choose how long to mute the rule for; nothing was changed.',
        );
      const minutes = choice === 'forever' ? null : Number(choice);
      const who = actorOf(req);
      const rule = RULE_ID.test(req.params.id)
        ? await store.mute(req.params.id, minutes, who.actor)
        : null;
      if (!rule) return noSuchRule(reply);
      await deps.audit.write({
        ...who,
        action: 'alert_rule.mute',
        target: rule.id,
        detail: { minutes, until: rule.muted_until },
      });
      return redirectWithFlash(
        reply,
        deps,
        backTo(req, rule.id),
        `Rule "${rule.name}" muted ${rule.muted_until ? `until ${rule.muted_until.slice(0, 16).replace('T', ' ')} UTC` : 'until unmuted'}: it notifies nobody meanwhile.`,
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/alerts/:id/unmute',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const rule = RULE_ID.test(req.params.id) ? await store.unmute(req.params.id) : null;
      if (!rule) return noSuchRule(reply);
      await deps.audit.write({ ...actorOf(req), action: 'alert_rule.unmute', target: rule.id });
      return redirectWithFlash(reply, deps, backTo(req, rule.id), `Rule "${rule.name}" unmuted.`);
    },
  );

  app.post<{ Params: { id: string } }>(
    '/alerts/:id/test',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const rule = RULE_ID.test(req.params.id) ? await store.rule(req.params.id) : null;
      if (!rule) return noSuchRule(reply);
      let error: string | null = null;
      try {
        await sendTestNotice(deps.rt, rule);
      } catch (e) {
        error = String((e as Error).message ?? e).slice(0, 300);
      }
      await deps.audit.write({
        ...actorOf(req),
        action: 'alert_rule.test',
        target: rule.id,
        detail: { destination: rule.destination, ok: error === null, ...(error ? { error } : {}) },
      });
      const where =
        rule.destination_kind === 'email'
          ? `queued to ${rule.destination} through ENS's email channel`
          : `posted to ${rule.destination}`;
      return redirectWithFlash(
        reply,
        deps,
        backTo(req, rule.id),
        error ? `The test notification failed: ${error}.` : `Test notification ${where}.`,
      );
    },
  );

  app.post<{ Params: { id: string } }>(
    '/alerts/:id/delete',
    { preHandler: app.csrfProtection },
    async (req, reply) => {
      const deleted = RULE_ID.test(req.params.id) ? await store.delete(req.params.id) : null;
      if (!deleted) return noSuchRule(reply, 'That rule does not exist (already deleted?).');
      await deps.audit.write({
        ...actorOf(req),
        action: 'alert_rule.delete',
        target: deleted.id,
        detail: { name: deleted.name, scope: deleted.scope, value: deleted.value },
      });
      return redirectWithFlash(reply, deps, '/ops/alerts', `Rule "${deleted.name}" deleted.`);
    },
  );
}

/** Actions return to the page they were taken from: the rule's own page, or the list. */
function backTo(req: FastifyRequest, id: string): string {
  const ref = req.headers.referer ?? '';
  return ref.includes(`/ops/alerts/${id}`) ? `/ops/alerts/${id}` : '/ops/alerts';
}
