import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Meta signs every webhook post with X-Hub-Signature-256: "sha256=" + hex HMAC-SHA256 of the raw
 * body, keyed with the App Secret.
 * https://developers.facebook.com/docs/messenger-platform/webhook-reference (Validating payloads)
 */
export function hubSignature(rawBody: Buffer | string, appSecret: string): string {
  return `sha256=${createHmac('sha256', appSecret).update(rawBody).digest('hex')}`;
}

export function verifyHubSignature(
  rawBody: Buffer,
  header: string | string[] | undefined,
  appSecret: string,
): boolean {
  const value = Array.isArray(header) ? header[0] : header;
  if (typeof value !== 'string') return false;
  const m = /^sha256=([0-9a-fA-F]{64})$/.exec(value.trim());
  if (!m) return false;
  const given = Buffer.from(m[1]!, 'hex');
  const expected = createHmac('sha256', appSecret).update(rawBody).digest();
  return timingSafeEqual(given, expected);
}

/**
 * Constant-time string equality; hashing first makes the lengths equal so length leaks nothing
 * either.
 */
export function sameSecret(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a, 'utf8').digest();
  const hb = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(ha, hb);
}
