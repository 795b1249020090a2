import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { paths } from './schema.js';

type DeliveryRow =
  paths['/v2/deliveries']['get']['responses'][200]['content']['application/json']['results'][number];

/** The body ENS posts to a callback_url: the delivery's terminal state. */
export type CallbackPayload = Omit<
  DeliveryRow,
  'tenant' | 'event_type' | 'created_at' | 'updated_at' | 'status'
> & { status: 'sent' | 'failed' };

export class CallbackVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CallbackVerificationError';
  }
}

/**
 * The interface's X-ENS-Signature: hex HMAC-SHA256 of the raw body keyed with the secret's UTF-8
 * bytes.
 */
function ensSignatureHolds(body: Buffer, header: string, secret: string): boolean {
  const expected = Buffer.from(
    createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex'),
  );
  const given = Buffer.from(header.trim().toLowerCase());
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Verifies a callback as received, before anything reads it: X-ENS-Signature (the interface's
 * HMAC of the raw body, compared in constant time) and the Standard Webhooks signature
 * (webhook-id, webhook-timestamp, webhook-signature) with a timestamp within five minutes, so a
 * replayed post is refused. `secret` is the client's `whsec_…` callback secret.
 * Returns the payload; throws CallbackVerificationError otherwise. Use `webhook-id` to drop
 * duplicates: it is the same on every retry of one callback.
 */
export function verifyCallback(
  rawBody: Buffer | string,
  headers: Record<string, string | string[] | undefined> | Headers,
  secret: string,
): CallbackPayload {
  const get = (name: string): string => {
    const v =
      headers instanceof Headers
        ? headers.get(name)
        : (headers[name] ?? headers[name.toLowerCase()]);
    return (Array.isArray(v) ? v[0] : v) ?? '';
  };
  const bytes = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  if (!ensSignatureHolds(bytes, get('x-ens-signature'), secret))
    throw new CallbackVerificationError('callback refused: X-ENS-Signature is missing or wrong');
  const body = bytes.toString('utf8');
  try {
    return new Webhook(secret).verify(body, {
      'webhook-id': get('webhook-id'),
      'webhook-timestamp': get('webhook-timestamp'),
      'webhook-signature': get('webhook-signature'),
    }) as CallbackPayload;
  } catch (e) {
    if (e instanceof WebhookVerificationError)
      throw new CallbackVerificationError(`callback refused: ${e.message}`);
    throw e;
  }
}
