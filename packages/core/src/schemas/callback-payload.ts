import type { CallbackPayload } from './delivery.ts';

/**
 * Serialises a callback body: exactly the spec's fields, in the spec's order. The bytes are stored
 * once and re-posted unchanged on every retry, so the signature always covers what was first built.
 */
export function serialiseCallback(p: CallbackPayload): string {
  const ordered: CallbackPayload = {
    delivery_id: p.delivery_id,
    reference: p.reference,
    channel: p.channel,
    recipient: p.recipient,
    status: p.status,
    attempts: p.attempts,
    provider_message_id: p.provider_message_id,
    sent_at: p.sent_at,
    delivered_at: p.delivered_at,
    read_at: p.read_at,
    last_error: p.last_error,
  };
  return JSON.stringify(ordered);
}
