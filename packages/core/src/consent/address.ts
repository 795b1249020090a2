import { domainToASCII } from 'node:url';
import { normalisePhone } from '../phone.ts';
import type { Channel } from '../schemas/channel.ts';

/** The longest address any channel keys on (RFC 5321's path limit for email). */
const MAX_ADDRESS = 254;

/**
 * The key a suppression is stored and looked up under, or null when `raw` is not an address of
 * the channel. Email is case-folded whole and its domain put in IDNA ASCII form (RFC 5890), so
 * `Ann@Bücher.example` and `ann@xn--bcher-kva.example` are one entry: a local part whose case
 * matters to its server is rare, and folding errs on the side of the recipient's choice. Phone
 * numbers are E.164 with a leading +; a push user id is the caller's own, kept as given.
 */
export function normaliseAddress(channel: Channel, raw: string): string | null {
  const v = raw.trim();
  if (v.length === 0 || v.length > MAX_ADDRESS) return null;
  switch (channel) {
    case 'sms':
    case 'whatsapp':
      return normalisePhone(v);
    case 'email': {
      const at = v.lastIndexOf('@');
      if (at <= 0 || at === v.length - 1) return null;
      const local = v.slice(0, at);
      if (/[\s@<>()[\],;:"\\]/.test(local) || /[\u0000-\u001f\u007f]/.test(local)) return null;
      const domain = domainToASCII(v.slice(at + 1).toLowerCase());
      if (domain === '' || !domain.includes('.') || domain.length > 253) return null;
      const address = `${local.toLowerCase()}@${domain}`;
      return address.length <= MAX_ADDRESS ? address : null;
    }
    case 'push':
      return /[\u0000-\u001f\u007f]/.test(v) ? null : v;
  }
}

/**
 * The SQL expression that gives a delivery row's key as normaliseAddress would: the accept already
 * stores email recipients with a lower-case ASCII domain and phone numbers in E.164, so only the
 * email's local part is left to fold.
 */
export const deliveryAddressSql = (alias: string): string =>
  `CASE WHEN ${alias}.channel = 'email' THEN lower(${alias}.recipient) ELSE ${alias}.recipient END`;
