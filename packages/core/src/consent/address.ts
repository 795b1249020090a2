import { CHANNEL_RULES, MAX_ADDRESS } from '../domain/channels.ts';
import { CHANNELS, type Channel } from '../schemas/channel.ts';

/**
 * The key a suppression is stored and looked up under, or null when `raw` is not an address of
 * the channel: the channel's row says how its addresses are keyed (CHANNEL_RULES' `address`).
 */
export function normaliseAddress(channel: Channel, raw: string): string | null {
  const v = raw.trim();
  if (v.length === 0 || v.length > MAX_ADDRESS) return null;
  return CHANNEL_RULES[channel].address.key(v);
}

/** How a refusal names the channel's addresses: `an email address (name@domain)`. */
export function addressWording(channel: Channel, opts: { inPath?: boolean } = {}): string {
  const a = CHANNEL_RULES[channel].address;
  const inPath = opts.inPath && a.inPath !== null ? `; in a path, ${a.inPath}` : '';
  return `${a.is} (${a.form}${inPath})`;
}

const FOLDED = CHANNELS.filter((c) => CHANNEL_RULES[c].address.foldsCase).map((c) => `'${c}'`);

/**
 * The SQL expression that gives a delivery row's key as normaliseAddress would: only the
 * recipients of channels whose keys fold case need folding (see SuppressionAddress.foldsCase).
 * Part of the hot claim statement: for one such channel it reads `channel = 'email'`, as written.
 */
export const deliveryAddressSql = (alias: string): string => {
  if (FOLDED.length === 0) return `${alias}.recipient`;
  const test = FOLDED.length === 1 ? `= ${FOLDED[0]}` : `IN (${FOLDED.join(', ')})`;
  return `CASE WHEN ${alias}.channel ${test} THEN lower(${alias}.recipient) ELSE ${alias}.recipient END`;
};
