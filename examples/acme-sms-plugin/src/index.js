// An ENS provider plugin for the Acme SMS API (made up for this example):
//   POST {baseUrl}/v1/sms  Authorization: Bearer <apiKey>  {"to": "+4915…", "from": "ACME", "text": "…"}
//   201 {"id": "msg_…"} | 4xx/5xx {"error": {"code": "…", "message": "…"}}
//   Status webhook: POST {"id": "msg_…", "status": "delivered" | "failed", "reason"?, "at": ISO}
//   signed with X-Acme-Signature: hex HMAC-SHA256(webhookSecret, raw body).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Type } from 'typebox';
import {
  definePlugin,
  permanentError,
  rateLimitedError,
  retryAfterMs,
  transientError,
} from '@ens/plugin-sdk';

const Config = Type.Object(
  {
    apiKey: Type.String({ minLength: 1, description: 'Acme API key' }),
    from: Type.String({
      minLength: 1,
      maxLength: 11,
      description: "Default sender id; a tenant's sender_id overrides it",
    }),
    webhookSecret: Type.String({
      minLength: 16,
      description: 'Secret Acme signs status webhooks with',
    }),
    baseUrl: Type.String({
      default: 'https://api.acme-sms.example',
      pattern: '^https?://',
      description: 'API base URL',
    }),
    timeoutMs: Type.Integer({ default: 10_000, minimum: 100, description: 'Per-request timeout' }),
  },
  { additionalProperties: false },
);

/** Acme's answer → how ENS should treat it. The message becomes last_error, so it quotes Acme. */
async function refusal(res) {
  const body = await res.json().catch(() => ({}));
  const text =
    `acme ${res.status} ${body.error?.code ?? ''}: ${body.error?.message ?? res.statusText}`.trim();
  if (res.status === 429)
    return rateLimitedError(text, retryAfterMs(res.headers.get('retry-after')));
  if (res.status >= 500 || res.status === 401 || res.status === 403) return transientError(text);
  return permanentError(text);
}

function signatureOk(secret, raw, given) {
  const want = createHmac('sha256', secret).update(raw).digest();
  const got = Buffer.from(typeof given === 'string' ? given : '', 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}

export default definePlugin({
  name: 'acme-sms',
  channels: ['sms'],
  sdk: '^1.0.0',
  configSchema: Config,
  create(config, context) {
    return {
      async send(message) {
        let res;
        try {
          res = await fetch(`${config.baseUrl}/v1/sms`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${config.apiKey}`,
              'content-type': 'application/json',
            },
            body: JSON.stringify({
              to: message.recipient,
              from: message.tenantSettings.sender_id ?? config.from,
              text: message.content.body,
            }),
            signal: AbortSignal.timeout(config.timeoutMs),
          });
        } catch (e) {
          throw transientError(`acme: ${e.message}`, e);
        }
        if (res.status !== 201) throw await refusal(res);
        const { id } = await res.json();
        return { providerMessageId: id };
      },
      routes: [
        {
          method: 'POST',
          path: '/status',
          async handler(req) {
            if (!signatureOk(config.webhookSecret, req.rawBody, req.headers['x-acme-signature']))
              return { status: 401, body: { error: 'bad signature' } };
            const event = JSON.parse(req.rawBody.toString('utf8'));
            if (event.status === 'delivered' || event.status === 'failed') {
              await context.reportStatus({
                providerMessageId: event.id,
                status: event.status,
                at: new Date(event.at),
                error: event.status === 'failed' ? `acme: ${event.reason ?? 'failed'}` : undefined,
              });
            }
            return { status: 204 };
          },
        },
      ],
    };
  },
});
