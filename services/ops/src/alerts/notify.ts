import { createHash } from 'node:crypto';
import {
  accept,
  guardedFetch,
  isHttpError,
  newId,
  planDeliveries,
  type Handoff,
  type Runtime,
} from '@ens/core';
import { withClient } from '@ens/core/internal';

/** The internal client and tenant that alert emails are sent as, made on first use. */
export const ALERTS_CLIENT_NAME = 'ens-ops-alerts';
export const ALERTS_TENANT = 'ens-ops';
export const ALERTS_EVENT_TYPE = 'ens.ops.alert';

export interface AlertNotice {
  firingId: string;
  rule: {
    id: string;
    name: string;
    scope: string;
    value: string;
    window_minutes: number;
    min_volume: number;
    threshold_percent: number;
  };
  startedAt: string;
  total: number;
  failed: number;
  ratePercent: number;
  consoleUrl: string;
  /** A test sent from the console: says so, and nothing is firing. */
  test?: boolean;
}

const WEBHOOK_TIMEOUT_MS = 10_000;

/** The alert email: plain words an on-call person can act on from a phone. */
export function alertEmail(n: AlertNotice, to: string): Handoff {
  const what = `${n.rule.scope === 'event_type' ? 'event type' : 'tenant'} ${n.rule.value}`;
  const { reference, subject, body } = n.test
    ? {
        reference: `alert-test-${n.firingId}`,
        subject: `[ENS alert test] ${n.rule.name}`,
        body:
          `This is a test of the ENS alert "${n.rule.name}", sent from the console. Nothing is firing.\n\n` +
          `When ${n.rule.threshold_percent}% or more of the deliveries of ${what} that end within ${n.rule.window_minutes} minutes fail ` +
          `(with at least ${n.rule.min_volume} of them), this address gets an email like this one.\n\nConsole: ${n.consoleUrl}\n`,
      }
    : {
        reference: `alert-firing-${n.firingId}`,
        subject: `[ENS alert] ${n.rule.name}: ${n.ratePercent}% of ${what} deliveries failed`,
        body:
          `The ENS alert "${n.rule.name}" is firing.\n\n` +
          `${n.failed} of ${n.total} deliveries of ${what} that ended in the last ${n.rule.window_minutes} minutes failed (${n.ratePercent}%). ` +
          `The rule fires at ${n.rule.threshold_percent}% with at least ${n.rule.min_volume} deliveries.\n\n` +
          `Since: ${n.startedAt}\nConsole: ${n.consoleUrl}\n`,
      };
  return {
    tenant: ALERTS_TENANT,
    event_type: ALERTS_EVENT_TYPE,
    reference,
    messages: [
      { channel: 'email', recipients: [to], content: { kind: 'rendered', subject, body } },
    ],
  };
}

/** Finds the alerts client, or makes it; an advisory lock keeps two processes from making two. */
function alertsClient(rt: Runtime): Promise<string> {
  return withClient(rt.db, async (c) => {
    try {
      await c.query('SELECT pg_advisory_lock(7466005)');
      const found = await c.query<{ id: string }>(
        'SELECT id FROM clients WHERE name = $1 AND disabled_at IS NULL ORDER BY created_at LIMIT 1',
        [ALERTS_CLIENT_NAME],
      );
      const id =
        found.rows[0]?.id ?? (await rt.clients.create(ALERTS_CLIENT_NAME, false)).client_id;
      await rt.tenants.create(id, { tenant: ALERTS_TENANT, name: 'ENS operations console alerts' });
      return id;
    } finally {
      await c.query('SELECT pg_advisory_unlock(7466005)').catch(() => {});
    }
  });
}

/**
 * Sends the alert email through ENS's own email channel: the same accept path as POST
 * /v2/messages, with the firing as the idempotency key, so a retry after a crash cannot send twice.
 */
export async function sendAlertEmail(rt: Runtime, n: AlertNotice, to: string): Promise<void> {
  const clientId = await alertsClient(rt);
  const client = await rt.clients.get(clientId);
  const handoff = alertEmail(n, to);
  // One key per firing (or per test): the email's reference, alert-firing-… or alert-test-….
  const key = handoff.reference!;
  const planned = planDeliveries(handoff, { maxRecipients: rt.config.maxRecipients });
  try {
    // The door wakes the email's sender and the feed once it is stored (a replay wakes nothing).
    await accept(rt, {
      clientId,
      idempotencyKey: key,
      requestHash: createHash('sha256').update(key).digest('base64url'),
      tenant: handoff.tenant,
      eventType: handoff.event_type,
      reference: handoff.reference ?? null,
      callbackUrl: null,
      planned,
      messages: { email: handoff.messages[0]!.content },
      quota: (ch) => client?.dailyQuota[ch] ?? rt.config.dailyQuota,
    });
  } catch (e) {
    // Sent before (the key was used with other numbers): once per firing is what we want.
    if (isHttpError(e) && e.code === 'ENS_ERR_IDEMPOTENCY_KEY_REUSED') return;
    throw e;
  }
}

/**
 * Sends a rule's destination a test notice now, by email or webhook as the rule says; throws what
 * failed.
 */
export async function sendTestNotice(
  rt: Runtime,
  rule: AlertNotice['rule'] & { destination_kind: 'email' | 'webhook'; destination: string },
): Promise<void> {
  const notice: AlertNotice = {
    firingId: newId(),
    rule: {
      id: rule.id,
      name: rule.name,
      scope: rule.scope,
      value: rule.value,
      window_minutes: rule.window_minutes,
      min_volume: rule.min_volume,
      threshold_percent: rule.threshold_percent,
    },
    startedAt: new Date().toISOString(),
    total: 0,
    failed: 0,
    ratePercent: 0,
    consoleUrl: `${rt.config.publicUrl}/ops/alerts/${rule.id}`,
    test: true,
  };
  if (rule.destination_kind === 'email') await sendAlertEmail(rt, notice, rule.destination);
  else await postAlertWebhook(rule.destination, notice, rt.config.allowPrivateCallbacks);
}

/** Posts the firing to a webhook, through the outbound guard (no private address, no redirect). */
export async function postAlertWebhook(
  url: string,
  n: AlertNotice,
  allowPrivate: boolean,
): Promise<void> {
  const res = await guardedFetch(
    url,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'ens-ops-alerts' },
      body: JSON.stringify({
        type: n.test ? 'ens.alert.test' : 'ens.alert.firing',
        firing_id: n.firingId,
        rule: n.rule,
        started_at: n.startedAt,
        total: n.total,
        failed: n.failed,
        rate_percent: n.ratePercent,
        console_url: n.consoleUrl,
      }),
      signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
    },
    { allowPrivate },
  );
  await res.body?.cancel().catch(() => {});
  if (!res.ok) throw new Error(`the webhook answered HTTP ${res.status}`);
}
