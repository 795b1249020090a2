import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Tokens that name one delivery and cannot be made without the key: the signed return path of an
 * email (VERP, so a bounce written by any relay is matched to its delivery) and its one-click
 * unsubscribe link. A token is the delivery id and an 80-bit HMAC over it and its purpose, in
 * lower-case base32, 42 characters: short enough for an address's local part (64 at most) and the
 * same in a URL, and case-insensitive as mail systems may fold local parts.
 */
export type TokenPurpose = 'return-path' | 'unsubscribe';

const MAC_BYTES = 10;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const TOKEN = /^[a-z2-7]{42}$/;

function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

function fromBase32(s: string): Buffer {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of s) {
    value = (value << 5) | ALPHABET.indexOf(ch);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

function mac(key: Buffer, purpose: TokenPurpose, id: Buffer): Buffer {
  return createHmac('sha256', key).update(purpose).update(id).digest().subarray(0, MAC_BYTES);
}

export function signDeliveryToken(key: Buffer, purpose: TokenPurpose, deliveryId: string): string {
  const id = Buffer.from(deliveryId.replace(/-/g, ''), 'hex');
  return base32(Buffer.concat([id, mac(key, purpose, id)]));
}

/** The delivery id a token names, or null for anything this key did not sign for this purpose. */
export function readDeliveryToken(
  key: Buffer,
  purpose: TokenPurpose,
  token: string,
): string | null {
  const t = token.toLowerCase();
  if (!TOKEN.test(t)) return null;
  const raw = fromBase32(t);
  // 42 characters carry 210 bits for 208: only the encoding ENS writes (the last two bits zero) is
  // a token, or four strings would read as one (a changed last character would still pass).
  if (base32(raw) !== t) return null;
  const id = raw.subarray(0, 16);
  const given = raw.subarray(16, 16 + MAC_BYTES);
  if (given.length !== MAC_BYTES || !timingSafeEqual(given, mac(key, purpose, id))) return null;
  const hex = id.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The return path (envelope sender) of one delivery: `b<token>@<domain>`. */
export function returnPathFor(key: Buffer, domain: string, deliveryId: string): string {
  return `b${signDeliveryToken(key, 'return-path', deliveryId)}@${domain}`;
}

/**
 * The delivery a bounce's recipient address names, or null when it is not one ENS signed at
 * `domain`.
 */
export function deliveryOfReturnPath(key: Buffer, domain: string, address: string): string | null {
  const at = address.lastIndexOf('@');
  if (at < 0 || address.slice(at + 1).toLowerCase() !== domain.toLowerCase()) return null;
  const local = address.slice(0, at).toLowerCase();
  return local.startsWith('b') ? readDeliveryToken(key, 'return-path', local.slice(1)) : null;
}

/** The mailto address of one delivery's unsubscribe: `u<token>@<domain>`. */
export function unsubscribeMailtoFor(key: Buffer, domain: string, deliveryId: string): string {
  return `u${signDeliveryToken(key, 'unsubscribe', deliveryId)}@${domain}`;
}

/** The delivery an unsubscribe mail's recipient address names, or null. */
export function deliveryOfUnsubscribeMailto(
  key: Buffer,
  domain: string,
  address: string,
): string | null {
  const at = address.lastIndexOf('@');
  if (at < 0 || address.slice(at + 1).toLowerCase() !== domain.toLowerCase()) return null;
  const local = address.slice(0, at).toLowerCase();
  return local.startsWith('u') ? readDeliveryToken(key, 'unsubscribe', local.slice(1)) : null;
}
