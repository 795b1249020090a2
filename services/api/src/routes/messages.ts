import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type } from 'typebox';
import stringify from 'safe-stable-stringify';
import {
  accept,
  AcceptedHandoff,
  checkOutboundUrl,
  Errors,
  Handoff,
  mediaKey,
  planDeliveries,
  refuseBeforeStoring,
  type Channel,
  type FieldError,
  type Handoff as HandoffT,
  type Prepared,
  type Runtime,
} from '@ens/core';
import { deliveriesAccepted, recordMediaPuts } from '@ens/core/internal';
import { acceptSpanHooks, acceptTraceparent } from '../accept-tracing.ts';
import { errorResponses, success, V2_ERRORS } from '../openapi/responses.ts';
import { SEND_EXAMPLES, withExamples } from '../openapi/send-examples.ts';
import { typeboxValidator } from '../validation.ts';

const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.String({
    minLength: 1,
    maxLength: 255,
    description:
      'One per handoff, derived from a stable event of the caller. Scoped per client; kept ' +
      'ENS_IDEMPOTENCY_TTL.',
  }),
  // No pattern: W3C Trace Context says a malformed traceparent is ignored, never a reason to
  // refuse.
  traceparent: Type.Optional(
    Type.String({
      description:
        "W3C Trace Context of the caller's span (`00-<trace id>-<span id>-<flags>`). ENS's " +
        'accept, send attempts and callback posts join that trace, and each callback post ' +
        'carries a traceparent of its own span. A malformed value is ignored.',
    }),
  ),
  tracestate: Type.Optional(
    Type.String({ description: 'W3C Trace Context vendor state, kept with the accept span.' }),
  ),
});

/**
 * The route's validators, with one exception to the schema's wording: a send without an
 * Idempotency-Key keeps its own code (ENS_ERR_IDEMPOTENCY_KEY_MISSING), which callers test on,
 * rather than the generic validation failure the required header would give.
 */
const sendValidator: typeof typeboxValidator = (route) => {
  const validate = typeboxValidator(route);
  if (route.httpPart !== 'headers') return validate;
  return (headers) =>
    (headers as Record<string, unknown>)['idempotency-key'] === undefined
      ? { error: Errors.idempotencyKeyMissing() }
      : validate(headers);
};

// One character class, no nested groups: a quantified group over megabytes of text made V8's
// regex engine recurse until the stack ran out (a 500 for any image over about 3.3 MB).
const BASE64_CHARS = /^[A-Za-z0-9+/]*={0,2}$/;
const isBase64 = (s: string) => s.length % 4 === 0 && BASE64_CHARS.test(s);

interface DecodedImage {
  cid: string;
  mediaType: string;
  bytes: Buffer;
  key: string;
}

/**
 * Decodes every inline image and checks it, before any is stored: a request with one bad image
 * among several leaves nothing behind in media storage. Reports every bad image at once.
 */
function decodeImages(rt: Runtime, handoff: HandoffT): Map<number, DecodedImage[]> {
  const decoded = new Map<number, DecodedImage[]>();
  const errors: FieldError[] = [];
  for (const [i, entry] of handoff.messages.entries()) {
    const images = entry.content.inline_images;
    if (!images) continue;
    decoded.set(
      i,
      images.map((img, j) => {
        const path = `/messages/${i}/content/inline_images/${j}/data`;
        const data = img.data.replace(/\s+/g, '');
        const bytes = isBase64(data) ? Buffer.from(data, 'base64') : null;
        if (bytes === null) errors.push({ path, message: 'is not valid base64' });
        else if (bytes.length === 0) errors.push({ path, message: 'is empty' });
        else if (bytes.length > rt.config.maxImageBytes) {
          throw Errors.payloadTooLarge(
            `${path}: inline image "${img.cid}" is ${bytes.length} bytes decoded; the limit is ${rt.config.maxImageBytes} (ENS_MAX_IMAGE_BYTES).`,
          );
        }
        return {
          cid: img.cid,
          mediaType: img.media_type ?? 'image/png',
          bytes: bytes ?? Buffer.alloc(0),
          key: bytes ? mediaKey(bytes) : '',
        };
      }),
    );
  }
  const first = errors[0];
  if (first)
    throw Errors.validation(
      `Invalid body: ${first.path} ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`,
      errors,
    );
  return decoded;
}

/**
 * The handoff's messages as stored: decoded inline images replaced by their storage keys, so the
 * stored handoff (and every retry of every email) refers to a key instead of carrying megabytes of
 * base64.
 */
function storedMessages(
  handoff: HandoffT,
  decoded: Map<number, DecodedImage[]>,
): Record<string, unknown> {
  const byChannel: Record<string, unknown> = {};
  for (const [i, entry] of handoff.messages.entries()) {
    const { inline_images: _base64, ...rest } = entry.content;
    const content: Record<string, unknown> = { ...rest };
    const images = decoded.get(i);
    if (images)
      content.inline_images = images.map((img) => ({
        cid: img.cid,
        media_type: img.mediaType,
        size: img.bytes.length,
        storage_key: img.key,
      }));
    byChannel[entry.channel] = content;
  }
  return byChannel;
}

/**
 * Writes the decoded images to media storage, after recording their keys for the media collector
 * (see core/media/media-collector.ts). Returns which deliveries use which object.
 */
async function storeImages(
  rt: Runtime,
  handoff: HandoffT,
  decoded: Map<number, DecodedImage[]>,
  deliveries: readonly { id: string; channel: Channel }[],
): Promise<{ key: string; deliveryId: string }[]> {
  const all = [...decoded.values()].flat();
  await recordMediaPuts(
    rt.db,
    all.map((img) => img.key),
  );
  await Promise.all(all.map((img) => rt.media.put(img.bytes, img.mediaType, img.key)));
  const refs: { key: string; deliveryId: string }[] = [];
  for (const [i, images] of decoded) {
    const channel = handoff.messages[i]!.channel;
    for (const d of deliveries)
      if (d.channel === channel)
        for (const img of images) refs.push({ key: img.key, deliveryId: d.id });
  }
  return refs;
}

/** SHA-256 in base64url, one-shot where Node has it (20.12+): no Hash object per request. */
const sha256 =
  typeof crypto.hash === 'function'
    ? (s: string) => crypto.hash('sha256', s, 'base64url')
    : (s: string) => crypto.createHash('sha256').update(s).digest('base64url');

/** The 202, byte for byte as stored (a replay answers exactly what the first request got). */
function sendAccepted(reply: FastifyReply, body: string): FastifyReply {
  return reply
    .code(202)
    .header('content-type', 'application/json; charset=utf-8')
    .serializer((s: unknown) => s as string)
    .send(body);
}

/** POST /v2/messages — accept one handoff, store it and its deliveries, answer 202 pending. */
export function messagesRoute(app: FastifyInstance, rt: Runtime): void {
  app.post<{ Body: HandoffT; Headers: { 'idempotency-key'?: string } }>(
    '/v2/messages',
    {
      schema: {
        operationId: 'sendMessage',
        summary: 'Send one handoff across channels',
        description:
          'Answers 202 once the handoff and all its deliveries are durable. Replaying an ' +
          'Idempotency-Key returns the original 202 body byte for byte; the same key with a ' +
          'different body is 422.',
        tags: ['messages'],
        headers: IdempotencyHeaders,
        body: withExamples(Handoff, SEND_EXAMPLES),
        response: {
          202: success(
            AcceptedHandoff,
            'Accepted and durable; every delivery is pending. A replay answers the original ' +
              'body byte for byte.',
            {
              'Idempotent-Replayed': {
                type: 'string',
                const: 'true',
                description: 'Present on a replay of an earlier request',
              },
            },
          ),
          ...errorResponses([400, ...V2_ERRORS, 413, 415, 422], {
            400:
              'Invalid handoff, a tenant that is not provisioned ' +
              '(ENS_ERR_TENANT_NOT_PROVISIONED), or a missing Idempotency-Key ' +
              '(ENS_ERR_IDEMPOTENCY_KEY_MISSING)',
          }),
        },
      },
      validatorCompiler: sendValidator,
      ...acceptSpanHooks(),
    },
    async (req, reply) => {
      const key = req.headers['idempotency-key'];
      if (!key) throw Errors.idempotencyKeyMissing();
      const handoff = req.body;
      const planned = planDeliveries(handoff, { maxRecipients: rt.config.maxRecipients });
      let callbackUrl: string | null = null;
      if (handoff.callback_url !== undefined) {
        const checked = checkOutboundUrl(handoff.callback_url, {
          allowPrivate: rt.config.allowPrivateCallbacks,
        });
        if (!checked.ok)
          throw Errors.validation(`Invalid body: /callback_url ${checked.detail}`, [
            { path: '/callback_url', message: checked.detail },
          ]);
        callbackUrl = checked.url.toString();
      }
      const requestHash = sha256(stringify(handoff) ?? '');
      const decoded = decodeImages(rt, handoff);
      const client = req.client;
      const quota = (channel: Channel) => client.dailyQuota[channel] ?? rt.config.dailyQuota;
      const hasImages = [...decoded.values()].some((images) => images.length > 0);
      // The door mints the ids, stores the handoff and wakes its senders and the feed after the
      // commit.
      const result = await accept(rt, {
        clientId: client.id,
        idempotencyKey: key,
        requestHash,
        tenant: handoff.tenant,
        eventType: handoff.event_type,
        reference: handoff.reference ?? null,
        callbackUrl,
        planned,
        messages: storedMessages(handoff, decoded),
        quota,
        async prepare({ deliveries }): Promise<Prepared> {
          let mediaRefs: { key: string; deliveryId: string }[] | undefined;
          if (hasImages) {
            // Files outlive a rolled-back transaction: refuse what can be refused before writing
            // any.
            const replay = await refuseBeforeStoring(rt.db, {
              clientId: client.id,
              idempotencyKey: key,
              requestHash,
              tenant: handoff.tenant,
              deliveries,
              quota,
            });
            if (replay !== null) return { replay };
            mediaRefs = await storeImages(rt, handoff, decoded, deliveries);
          }
          return {
            mediaRefs,
            traceparent: acceptTraceparent(req, {
              clientId: client.id,
              tenant: handoff.tenant,
              deliveries: deliveries.length,
            }),
          };
        },
      });
      if (result.outcome === 'created') {
        for (const d of result.deliveries) deliveriesAccepted.inc({ channel: d.channel });
      } else {
        reply.header('idempotent-replayed', 'true');
      }
      return sendAccepted(reply, result.responseBody);
    },
  );
}
