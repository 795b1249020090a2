import type {
  PluginContext,
  RecipientReport,
  RecipientRefusal,
  StatusUpdate,
  WebhookRequest,
  WebhookResponse,
  WebhookRoute,
} from '@ens/plugin-sdk';
import { EVENT_TYPE_ONLY_REFUSALS, RECIPIENT_REFUSALS } from './graph-errors.ts';
import { sameSecret, verifyHubSignature } from './signature.ts';

/**
 * The Cloud API's webhook: a GET subscription handshake and signed POSTs carrying message
 * statuses. ENS mounts it at /webhooks/whatsapp/webhook. A failed status whose error is about
 * the recipient (not on WhatsApp, stopped the business's marketing) also reports the recipient,
 * so ENS suppresses the number as it does for the same refusal at send time.
 * https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/
 */

interface StatusError {
  code?: number;
  title?: string;
  message?: string;
  error_data?: { details?: string };
}

interface WaStatus {
  id?: string;
  status?: string;
  timestamp?: string | number;
  recipient_id?: string;
  errors?: StatusError[];
}

interface Envelope {
  object?: string;
  entry?: {
    id?: string;
    changes?: { field?: string; value?: { statuses?: WaStatus[]; errors?: StatusError[] } }[];
  }[];
}

const REPORTED: Record<string, StatusUpdate['status'] | undefined> = {
  delivered: 'delivered',
  read: 'read',
  failed: 'failed',
};

/** "whatsapp <code>: <title> (<details>)" for each error the status carries. */
export function describeStatusErrors(errors: StatusError[] | undefined): string {
  const list = Array.isArray(errors) ? errors : [];
  if (list.length === 0) return 'whatsapp: message failed (Meta gave no reason)';
  return list
    .map((e) => {
      const title = e.title ?? e.message ?? 'no title';
      const details = e.error_data?.details;
      return `whatsapp ${e.code ?? '?'}: ${title}${details ? ` (${details})` : ''}`;
    })
    .join('; ');
}

const asArray = <T>(v: T[] | undefined): T[] => (Array.isArray(v) ? v : []);

/**
 * The refusal about the recipient a failed status's errors name, if any (the first one that does).
 */
export function recipientRefusalOf(
  errors: StatusError[] | undefined,
): { kind: RecipientRefusal; eventTypeOnly: boolean } | undefined {
  for (const e of asArray(errors)) {
    const code = Number(e?.code);
    const refusal = RECIPIENT_REFUSALS.get(code);
    if (refusal) return { kind: refusal, eventTypeOnly: EVENT_TYPE_ONLY_REFUSALS.has(code) };
  }
  return undefined;
}

export function webhookRoutes(
  opts: { appSecret: string; verifyToken: string },
  context: PluginContext,
): WebhookRoute[] {
  const verify: WebhookRoute = {
    method: 'GET',
    path: '/webhook',
    async handler(req: WebhookRequest): Promise<WebhookResponse> {
      const mode = req.query['hub.mode'];
      const token = req.query['hub.verify_token'];
      const challenge = req.query['hub.challenge'];
      if (
        mode !== 'subscribe' ||
        typeof token !== 'string' ||
        !sameSecret(token, opts.verifyToken)
      ) {
        context.logger.warn(
          { mode },
          'whatsapp: webhook verification refused (mode or verify token does not match)',
        );
        return {
          status: 403,
          body: 'Forbidden',
          headers: { 'content-type': 'text/plain; charset=utf-8' },
        };
      }
      if (typeof challenge !== 'string' || challenge === '') {
        return {
          status: 400,
          body: 'hub.challenge is missing',
          headers: { 'content-type': 'text/plain; charset=utf-8' },
        };
      }
      return {
        status: 200,
        body: challenge,
        headers: { 'content-type': 'text/plain; charset=utf-8' },
      };
    },
  };

  const receive: WebhookRoute = {
    method: 'POST',
    path: '/webhook',
    async handler(req: WebhookRequest): Promise<WebhookResponse> {
      if (!verifyHubSignature(req.rawBody, req.headers['x-hub-signature-256'], opts.appSecret)) {
        context.logger.warn(
          { hasSignature: req.headers['x-hub-signature-256'] !== undefined },
          'whatsapp: webhook refused: X-Hub-Signature-256 missing or wrong',
        );
        return { status: 401, body: { error: 'invalid X-Hub-Signature-256' } };
      }
      let envelope: Envelope;
      try {
        envelope = JSON.parse(req.rawBody.toString('utf8')) as Envelope;
      } catch {
        return { status: 400, body: { error: 'body is not JSON' } };
      }
      // Other objects (page, instagram) can share an app's callback URL; they are not ours to read.
      if (envelope?.object !== 'whatsapp_business_account')
        return { status: 200, body: { ok: true } };

      const updates: StatusUpdate[] = [];
      const recipients: RecipientReport[] = [];
      for (const entry of asArray(envelope.entry)) {
        for (const change of asArray(entry?.changes)) {
          if (change?.field !== 'messages' || !change.value) continue;
          for (const err of asArray(change.value.errors)) {
            // System- or account-level errors name no message, so there is nothing to report them
            // against.
            context.logger.warn(
              {
                waba: entry.id,
                code: err.code,
                title: err.title,
                details: err.error_data?.details,
              },
              'whatsapp: webhook reports an account-level error',
            );
          }
          for (const s of asArray(change.value.statuses)) {
            const status = REPORTED[String(s?.status)];
            // "sent" adds nothing to ENS's own sent state; other statuses (deleted, played…) have
            // no ENS meaning.
            if (!status || typeof s.id !== 'string' || s.id === '') continue;
            const seconds = Number(s.timestamp);
            const at = Number.isFinite(seconds) ? new Date(seconds * 1000) : new Date();
            updates.push(
              status === 'failed'
                ? { providerMessageId: s.id, status, at, error: describeStatusErrors(s.errors) }
                : { providerMessageId: s.id, status, at },
            );
            const refusal = status === 'failed' ? recipientRefusalOf(s.errors) : undefined;
            if (refusal)
              recipients.push({
                ...refusal,
                providerMessageId: s.id,
                at,
                detail: describeStatusErrors(s.errors),
              });
          }
        }
      }
      // In arrival order: the core keeps statuses monotonic (read implies delivered), so no
      // reordering here.
      for (const u of updates) {
        try {
          await context.reportStatus(u);
        } catch (e) {
          // Answering 5xx makes Meta redeliver the batch; repeats are harmless because the core
          // dedupes.
          context.logger.error(
            { err: e, providerMessageId: u.providerMessageId, status: u.status },
            'whatsapp: could not record a status; asking Meta to retry',
          );
          return { status: 500, body: { error: 'status could not be recorded' } };
        }
      }
      for (const r of recipients) {
        try {
          await context.reportRecipient(r);
        } catch (e) {
          // As for statuses: Meta redelivers, and a repeated report rewrites the same entry.
          context.logger.error(
            { err: e, providerMessageId: r.providerMessageId, kind: r.kind },
            'whatsapp: could not record a refused recipient; asking Meta to retry',
          );
          return { status: 500, body: { error: 'recipient report could not be recorded' } };
        }
      }
      return { status: 200, body: { ok: true } };
    },
  };
  return [verify, receive];
}
