import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkOutboundUrl, planDeliveries } from '@ens/core';
import { AlertStore, type AlertRule, type FiringRow, type NewAlertRule } from '../alerts/alert-store.ts';
import { alertEmail } from '../alerts/notify.ts';
import { FIRING_SQL, type FiringAlert } from '../queries/summary.ts';
import { actorOf, formValue, pageContext, queryValue, redirectWithFlash, sendPage, type ConsoleDeps } from '../request-context.ts';
import { actionButton, field, orDash, pager, percent, selectField, time } from '../views/components.ts';
import { html, type Html } from '../views/html.ts';
import { consolePage, csrfField } from '../views/layout.ts';
import { firingTable } from './dashboard.ts';

const PAGE = 50;
type Values = Record<'name' | 'scope' | 'value' | 'window_minutes' | 'min_volume' | 'threshold_percent' | 'destination', string>;
type Errors = Partial<Record<keyof Values, string>>;

const EMPTY: Values = { name: '', scope: 'event_type', value: '', window_minutes: '15', min_volume: '20', threshold_percent: '10', destination: '' };

/** Checks the new-rule form; every problem is reported beside its field. */
export function parseRule(body: unknown, maxRecipients: number, allowPrivate = false): { values: Values; errors: Errors; rule: NewAlertRule | null } {
  const values = Object.fromEntries(Object.keys(EMPTY).map((k) => [k, formValue(body, k).trim()])) as Values;
  const errors: Errors = {};
  if (!values.name) errors.name = 'Give the rule a name.';
  else if (values.name.length > 200) errors.name = 'Use at most 200 characters.';
  if (values.scope !== 'event_type' && values.scope !== 'tenant') errors.scope = 'Choose event type or tenant.';
  if (!values.value) errors.value = 'Enter the event type or tenant to watch.';
  else if (values.value.length > 200) errors.value = 'Use at most 200 characters.';
  const int = (k: 'window_minutes' | 'min_volume', min: number, max: number, msg: string) => {
    if (!/^\d{1,6}$/.test(values[k]) || Number(values[k]) < min || Number(values[k]) > max) errors[k] = msg;
  };
  int('window_minutes', 1, 1440, 'Enter a whole number of minutes from 1 to 1440.');
  int('min_volume', 1, 1_000_000, 'Enter a whole number of deliveries, 1 or more.');
  const t = Number(values.threshold_percent);
  if (!/^\d{1,3}(\.\d{1,2})?$/.test(values.threshold_percent) || !(t > 0 && t <= 100)) errors.threshold_percent = 'Enter a percentage above 0 and at most 100, such as 5 or 12.5.';
  let kind: 'email' | 'webhook' = 'email';
  if (!values.destination) errors.destination = 'Enter an email address or a webhook URL (https://…).';
  else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(values.destination)) {
    kind = 'webhook';
    let u: URL | null = null;
    try {
      u = new URL(values.destination);
    } catch {
      u = null;
    }
    if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:')) errors.destination = 'A webhook URL must start with https:// (or http://).';
    else {
      // ENS posts to it: the outbound guard's rules hold from the moment it is saved.
      const checked = checkOutboundUrl(values.destination, { allowPrivate });
      if (!checked.ok) errors.destination = `This webhook URL cannot be used: it ${checked.detail}.`;
    }
  } else {
    // The same rules the API applies to an email recipient.
    try {
      planDeliveries(
        alertEmail({ firingId: '0', rule: { id: '0', name: 'x', scope: 'event_type', value: 'x', window_minutes: 1, min_volume: 1, threshold_percent: 1 }, startedAt: '', total: 0, failed: 0, ratePercent: 0, consoleUrl: '' }, values.destination),
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

function rulesTable(rules: AlertRule[], csrf: string): Html {
  return html`<table id="alert-rules">
<caption>Alert rules</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Watches</th><th scope="col">Fires when</th><th scope="col">Notifies</th><th scope="col">State</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>
${rules.length === 0 ? html`<tr><td colspan="7" class="muted">No rule yet.</td></tr>` : ''}
${rules.map((r) => html`<tr data-rule-id="${r.id}"><td>${r.name}</td><td>${r.scope === 'event_type' ? 'event type' : 'tenant'} <code>${r.value}</code></td>
<td>≥ ${percent(r.threshold_percent)} failed over ${r.window_minutes} min, with ≥ ${r.min_volume} ended</td>
<td>${r.destination_kind}: <span class="wrap">${r.destination}</span></td>
<td>${r.firing_since ? html`<span class="badge status-failed">firing</span> since ${time(r.firing_since)}` : html`<span class="badge status-sent">ok</span>`}</td>
<td>${time(r.created_at)} by ${r.created_by}</td>
<td>${actionButton(`/ops/alerts/${r.id}/delete`, 'Delete', csrf, { danger: true })}</td></tr>`)}
</tbody>
</table>`;
}

function firingsTable(rows: FiringRow[]): Html {
  return html`<table id="alert-firings">
<caption>Firings, newest first</caption>
<thead><tr><th scope="col">Rule</th><th scope="col">Started</th><th scope="col">Resolved</th><th scope="col" class="num">Ended / failed</th><th scope="col" class="num">Rate</th><th scope="col">Notified</th></tr></thead>
<tbody>
${rows.length === 0 ? html`<tr><td colspan="6" class="muted">No rule has fired.</td></tr>` : ''}
${rows.map((f) => html`<tr data-firing-id="${f.id}"><td>${f.rule_name}</td><td>${time(f.started_at)}</td><td>${f.resolved_at ? time(f.resolved_at) : html`<span class="badge status-failed">firing</span>`}</td>
<td class="num">${f.total} / ${f.failed}</td><td class="num">${percent(f.rate_percent)}</td>
<td>${f.notified_at ? time(f.notified_at) : f.notify_error ? html`<span class="error-text">failed: ${f.notify_error}</span>` : orDash(null)}</td></tr>`)}
</tbody>
</table>`;
}

function ruleForm(csrf: string, v: Values, e: Errors): Html {
  return html`<form id="create-alert" method="post" action="/ops/alerts" class="card" aria-labelledby="create-alert-h">
<h2 id="create-alert-h">New rule</h2>
${csrfField(csrf)}
${Object.keys(e).length > 0 ? html`<p class="error-summary" role="alert">The rule was not created: fix the marked fields.</p>` : ''}
${field({ name: 'name', label: 'Name', value: v.name, error: e.name, required: true })}
${selectField({ name: 'scope', label: 'Watch', value: v.scope, error: e.scope, options: [{ value: 'event_type', label: 'an event type' }, { value: 'tenant', label: 'a tenant' }] })}
${field({ name: 'value', label: 'Event type or tenant', value: v.value, error: e.value, required: true })}
${field({ name: 'window_minutes', label: 'Window (minutes)', value: v.window_minutes, error: e.window_minutes, type: 'number' })}
${field({ name: 'min_volume', label: 'Minimum ended deliveries', value: v.min_volume, error: e.min_volume, type: 'number', hint: 'Below this, the rule does not fire' })}
${field({ name: 'threshold_percent', label: 'Failure threshold (%)', value: v.threshold_percent, error: e.threshold_percent, hint: 'Fires at or above this share of failed deliveries' })}
${field({ name: 'destination', label: 'Notify', value: v.destination, error: e.destination, required: true, hint: 'An email address (sent through ENS\'s email channel) or a webhook URL (JSON POST)' })}
<div class="actions"><button type="submit" class="button">Create rule</button></div>
</form>`;
}

export function alertRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const store = new AlertStore(deps.rt.db);

  const render = async (req: FastifyRequest, reply: FastifyReply, status: number, values: Values, errors: Errors) => {
    const after = queryValue(req.query, 'after');
    const before = queryValue(req.query, 'firings_before');
    const [rules, firings, firing] = await Promise.all([
      store.rules({ after: /^\d{1,18}$/.test(after) ? after : undefined, limit: PAGE + 1 }),
      store.firings({ before: /^\d{1,18}$/.test(before) ? before : undefined, limit: PAGE + 1 }),
      deps.rt.db.query<FiringAlert>(FIRING_SQL),
    ]);
    const rulesPage = rules.slice(0, PAGE);
    const firingsPage = firings.slice(0, PAGE);
    const ctx = pageContext(req, reply, deps, 'alerts');
    return sendPage(
      reply,
      status,
      consolePage(ctx, 'Alerts', html`<h1>Alerts</h1>
<p>Rules on the failure rate of an event type or a tenant. They are checked every 30 seconds; a firing rule notifies its destination once.</p>
<section id="alerts-firing" aria-labelledby="firing-h">
<h2 id="firing-h">Firing now</h2>
${firingTable(firing.rows)}
</section>
<section aria-labelledby="rules-h">
<h2 id="rules-h">Rules</h2>
${rulesTable(rulesPage, ctx.csrf)}
${pager(rules.length > PAGE ? rulesPage[rulesPage.length - 1]!.id : null, (a) => `/ops/alerts?after=${a}`)}
${ruleForm(ctx.csrf, values, errors)}
</section>
<section aria-labelledby="firings-h">
<h2 id="firings-h">History</h2>
${firingsTable(firingsPage)}
${pager(firings.length > PAGE ? firingsPage[firingsPage.length - 1]!.id : null, (a) => `/ops/alerts?firings_before=${a}`)}
</section>`),
    );
  };

  app.get('/alerts', async (req, reply) => render(req, reply, 200, EMPTY, {}));

  app.post('/alerts', { preHandler: app.csrfProtection }, async (req, reply) => {
    const { values, errors, rule } = parseRule(req.body, deps.rt.config.maxRecipients, deps.rt.config.allowPrivateCallbacks);
    if (!rule) return render(req, reply, 400, values, errors);
    const who = actorOf(req);
    const created = await store.create(rule, who.actor);
    await deps.audit.write({ ...who, action: 'alert_rule.create', target: created.id, detail: { ...rule } });
    return redirectWithFlash(reply, deps, '/ops/alerts', `Rule "${created.name}" created.`);
  });

  app.post<{ Params: { id: string } }>('/alerts/:id/delete', { preHandler: app.csrfProtection }, async (req, reply) => {
    const deleted = /^\d{1,18}$/.test(req.params.id) ? await store.delete(req.params.id) : null;
    if (!deleted) return redirectWithFlash(reply, deps, '/ops/alerts', 'That rule does not exist (already deleted?).');
    await deps.audit.write({ ...actorOf(req), action: 'alert_rule.delete', target: deleted.id, detail: { name: deleted.name, scope: deleted.scope, value: deleted.value } });
    return redirectWithFlash(reply, deps, '/ops/alerts', `Rule "${deleted.name}" deleted.`);
  });
}
