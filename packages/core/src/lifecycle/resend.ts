import { createHash } from 'node:crypto';
import { isHttpError } from '../errors.ts';
import { recordMediaPuts } from '../media/media-collector.ts';
import type { Runtime } from '../runtime.ts';
import { readResendSource } from '../store/read-models/resend-source.ts';
import { accept } from './accept.ts';

/*
 * The console's resend, a transition of the one door: a resend is a new delivery, made through the
 * same accept path as POST /v2/messages, never the old one put back to pending. A delivery's
 * outcome is final and versioned: the client may have read "failed" from the feed and had its
 * callback; turning that row back into "pending" would rewrite history the feed already served
 * (docs/design/overview.md, invariants 1 and 3). The new delivery is in a handoff of its own, with
 * the original's tenant, event type, reference and content, so the client's feed shows it as one
 * more delivery of that reference. No callback is posted for it: the client did not ask for it, and
 * the console shows its outcome.
 */

export type ResendResult =
  | { ok: true; deliveryId: string; handoffId: string; replayed: boolean }
  | { ok: false; code: 'not_found' | 'not_ended' | 'media_gone' | 'refused'; detail: string };

/**
 * The storage keys of a stored content's inline images (already moved to media storage at accept).
 */
function imageKeys(content: Record<string, unknown>): string[] {
  const images = content.inline_images;
  if (!Array.isArray(images)) return [];
  return images
    .map((i) => (i as { storage_key?: unknown }).storage_key)
    .filter((k): k is string => typeof k === 'string');
}

/**
 * Resends delivery `id` once per `submission` (the form's one-time id): the submission is the
 * idempotency key, so a double click or a reload of the answer creates one delivery, not two.
 */
export async function resendDelivery(
  rt: Runtime,
  id: string,
  submission: string,
): Promise<ResendResult> {
  const o = await readResendSource(rt.db, id);
  if (!o?.content) return { ok: false, code: 'not_found', detail: `No delivery has the id ${id}.` };
  if (o.status === 'pending')
    return {
      ok: false,
      code: 'not_ended',
      detail:
        'This delivery is still pending: ENS is still sending it, so there is nothing to ' +
        'resend yet.',
    };
  const keys = imageKeys(o.content);
  if (keys.length > 0) {
    // Marks the objects as just written, so the media collector leaves them for ENS_MEDIA_GRACE,
    // then checks they are still there (the collector removes an image once no pending delivery
    // uses it).
    await recordMediaPuts(rt.db, keys);
    try {
      await Promise.all(keys.map((k) => rt.media.get(k)));
    } catch {
      return {
        ok: false,
        code: 'media_gone',
        detail:
          "This message's inline images are no longer stored, so it cannot be sent again as it " +
          'was. Ask the client to send it again.',
      };
    }
  }
  const client = await rt.clients.get(o.client_id);
  try {
    // The door wakes the new delivery's sender and the feed once it is stored (a replay wakes
    // nothing).
    const r = await accept(rt, {
      clientId: o.client_id,
      idempotencyKey: `ens-console-resend-${submission}`,
      requestHash: createHash('sha256').update(`resend:${id}`).digest('base64url'),
      tenant: o.tenant,
      eventType: o.event_type,
      reference: o.reference,
      callbackUrl: null,
      planned: [{ channel: o.channel, recipient: o.recipient }],
      messages: { [o.channel]: o.content },
      quota: (ch) => client?.dailyQuota[ch] ?? rt.config.dailyQuota,
      prepare: ({ deliveries }) =>
        keys.length > 0
          ? { mediaRefs: keys.map((key) => ({ key, deliveryId: deliveries[0]!.id })) }
          : {},
    });
    if (r.outcome === 'replay') {
      const first = JSON.parse(r.responseBody) as {
        handoff_id: string;
        deliveries: { delivery_id: string }[];
      };
      return {
        ok: true,
        deliveryId: first.deliveries[0]!.delivery_id,
        handoffId: first.handoff_id,
        replayed: true,
      };
    }
    return { ok: true, deliveryId: r.deliveries[0]!.id, handoffId: r.handoffId, replayed: false };
  } catch (e) {
    // The accept path's refusals (tenant removed, quota used up, key reused): said as they are.
    if (isHttpError(e)) return { ok: false, code: 'refused', detail: e.message };
    throw e;
  }
}
