import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signing primitives for ENS callbacks.
 *
 * Every callback carries two independent signatures over the same raw body:
 *
 * - `X-ENS-Signature`: lower-case hex HMAC-SHA256 of the raw body ({@link ensSignature}).
 * - The Standard Webhooks v1 headers `webhook-id`, `webhook-timestamp`, `webhook-signature`
 *   ({@link standardWebhookHeaders}), so receivers can use an off-the-shelf Standard Webhooks
 *   verifier instead of ours.
 *
 * Callers must sign the exact bytes they send: serialise the JSON once, sign that Buffer and
 * hand the same Buffer to the poster. Re-serialising between signing and sending breaks every
 * receiver's verification.
 */

const WHSEC_PREFIX = 'whsec_';
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function requireSecret(secret: string): void {
  // An empty key still produces a valid-looking HMAC that anyone can forge, so a missing
  // secret must fail loudly rather than sign.
  if (typeof secret !== 'string' || secret.length === 0) {
    throw new TypeError('callback secret must be a non-empty string');
  }
}

/**
 * The `X-ENS-Signature` header value: lower-case hex HMAC-SHA256 of `rawBody`, keyed with the
 * UTF-8 bytes of `secret`.
 *
 * A string body is signed as its UTF-8 bytes, which is what goes on the wire when a string is
 * sent; prefer passing the Buffer you actually send.
 *
 * @throws TypeError when `secret` is empty.
 */
export function ensSignature(rawBody: Buffer | string, secret: string): string {
  requireSecret(secret);
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(toBytes(rawBody)).digest('hex');
}

/**
 * Checks an `X-ENS-Signature` header against `rawBody` in constant time.
 *
 * Hex case is ignored (some proxies and languages upper-case hex). Any malformed, missing or
 * wrong-length header, or an empty secret, yields `false`; this never throws, so receivers can
 * call it directly on untrusted input.
 */
export function verifyEnsSignature(
  rawBody: Buffer | string,
  secret: string,
  header: string | null | undefined,
): boolean {
  if (typeof header !== 'string' || typeof secret !== 'string' || secret.length === 0) return false;
  const expected = Buffer.from(ensSignature(rawBody, secret), 'utf8');
  const given = Buffer.from(header.trim().toLowerCase(), 'utf8');
  // timingSafeEqual throws on unequal lengths; the length of a hex digest is public anyway.
  if (given.length !== expected.length) return false;
  return timingSafeEqual(given, expected);
}

export interface StandardWebhookHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The three Standard Webhooks v1 headers (https://www.standardwebhooks.com/, spec 1.0.0).
 *
 * Signed content is `${webhookId}.${seconds}.${rawBody}` where `seconds` is the integer Unix
 * time of `timestamp` (floored). The signature header is `v1,<base64 HMAC-SHA256>`.
 *
 * `webhookId` must stay the same across retries of one callback (receivers use it as the
 * idempotency key) while `timestamp` must be the time of *this* attempt (receivers reject
 * stale timestamps, five minutes in the reference libraries), so call this again per attempt.
 *
 * Secret format (decision): the spec keys the HMAC with the base64-decoded part of a
 * `whsec_<base64>` secret. ENS issues its callback secrets in that form; secrets of any other
 * form (older or imported ones) are still handled:
 * - a secret starting with `whsec_` is keyed with the base64-decoded remainder, exactly as the
 *   spec and its reference libraries do;
 * - any other secret is keyed with its UTF-8 bytes, the same key as `X-ENS-Signature`.
 *   Receivers using a Standard Webhooks library pass either `whsec_` + base64(secret) or, with
 *   the reference JS library, `new Webhook(secret, { format: 'raw' })` (that library reads raw
 *   secrets as Latin-1, which equals UTF-8 only for ASCII, so ENS secrets should be ASCII).
 * Consequently ENS must never issue a plain secret that itself starts with `whsec_`.
 *
 * @throws TypeError when the secret is empty, a `whsec_` secret is not valid base64 or decodes
 *   to nothing, `timestamp` is not a valid date, or `webhookId` is empty or contains `.`,
 *   whitespace or control characters (a `.` would make the signed content ambiguous, which the
 *   spec forbids; the others cannot travel in a header).
 */
export function standardWebhookHeaders(opts: {
  webhookId: string;
  timestamp: Date;
  rawBody: Buffer | string;
  secret: string;
}): StandardWebhookHeaders {
  const { webhookId, timestamp, rawBody, secret } = opts;
  if (typeof webhookId !== 'string' || !/^[\x21-\x2d\x2f-\x7e]+$/.test(webhookId)) {
    throw new TypeError('webhookId must be non-empty printable ASCII without "." or whitespace');
  }
  const ms = timestamp instanceof Date ? timestamp.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) throw new TypeError('timestamp must be a valid Date');
  const seconds = String(Math.floor(ms / 1000));

  const mac = createHmac('sha256', standardWebhookKey(secret));
  mac.update(`${webhookId}.${seconds}.`, 'utf8');
  mac.update(toBytes(rawBody));
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': seconds,
    'webhook-signature': `v1,${mac.digest('base64')}`,
  };
}

function standardWebhookKey(secret: string): Buffer {
  requireSecret(secret);
  if (!secret.startsWith(WHSEC_PREFIX)) return Buffer.from(secret, 'utf8');
  const encoded = secret.slice(WHSEC_PREFIX.length);
  // Buffer.from(…, 'base64') silently skips bad characters; a typo'd secret must not turn
  // into a different, weaker key.
  if (encoded.length === 0 || !STRICT_BASE64.test(encoded)) {
    throw new TypeError('whsec_ secret must be followed by non-empty standard base64');
  }
  return Buffer.from(encoded, 'base64');
}

function toBytes(body: Buffer | string): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}
