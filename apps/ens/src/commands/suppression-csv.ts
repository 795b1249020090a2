import {
  CHANNELS,
  normaliseAddress,
  SUPPRESSION_REASONS,
  type Channel,
  type SuppressionInput,
  type SuppressionReasonT,
} from '@ens/core';

/*
 * How `ens suppressions import` reads a row of a CSV file: ENS's own export (channel, address,
 * reason, scope, detail, …) and the suppression exports of the providers a team moves from.
 * Header names are matched without regard to case, spaces, `_` or `-`; other columns are ignored.
 *   SendGrid   email, created, reason (a bounce's text), status
 *   Postmark   EmailAddress, SuppressionReason (HardBounce, SpamComplaint, ManualSuppression), Origin, CreatedAt
 *   Amazon SES EmailAddress, Reason (BOUNCE, COMPLAINT), LastUpdateTime
 *   Mailgun    address, code, error, created_at
 */

type Field = 'channel' | 'address' | 'reason' | 'scope' | 'detail' | 'expires_at';

const COLUMNS: Record<string, Field> = {
  channel: 'channel',
  address: 'address',
  email: 'address',
  emailaddress: 'address',
  recipient: 'address',
  phone: 'address',
  phonenumber: 'address',
  reason: 'reason',
  suppressionreason: 'reason',
  scope: 'scope',
  eventtype: 'scope',
  detail: 'detail',
  details: 'detail',
  description: 'detail',
  error: 'detail',
  diagnosticcode: 'detail',
  expiresat: 'expires_at',
};

/** Reason words of other providers' exports, and ENS's own, as ENS's reasons. */
const REASONS: Record<string, SuppressionReasonT> = {
  hardbounce: 'hard_bounce',
  bounce: 'hard_bounce',
  bounced: 'hard_bounce',
  bounces: 'hard_bounce',
  softbounce: 'soft_bounce',
  complaint: 'complaint',
  complaints: 'complaint',
  spamcomplaint: 'complaint',
  spam: 'complaint',
  spamreport: 'complaint',
  spamreports: 'complaint',
  abuse: 'complaint',
  optout: 'opt_out',
  unsubscribe: 'opt_out',
  unsubscribed: 'opt_out',
  unsubscribes: 'opt_out',
  groupunsubscribe: 'opt_out',
  stop: 'opt_out',
  invalidrecipient: 'invalid_recipient',
  invalid: 'invalid_recipient',
  invalidemail: 'invalid_recipient',
  invalidemails: 'invalid_recipient',
  manual: 'manual',
  manualsuppression: 'manual',
};

const key = (s: string): string => s.toLowerCase().replace(/[\s_-]+/g, '');

/** A reason as ENS names it, from any of the words above (or null). */
export function readReason(cell: string): SuppressionReasonT | null {
  return REASONS[key(cell)] ?? null;
}

/** Where each field is in a row, read from the header; an error names what is missing. */
export type Header = Partial<Record<Field, number>>;

export function readHeader(cells: readonly string[]): Header | { error: string } {
  const h: Header = {};
  cells.forEach((c, i) => {
    const f = COLUMNS[key(c)];
    if (f !== undefined && h[f] === undefined) h[f] = i;
  });
  if (h.address === undefined) {
    return {
      error: `the header (${cells.slice(0, 8).join(',')}) has no address column: name one address, email, email_address, recipient or phone (then channel, reason, scope, detail)`,
    };
  }
  return h;
}

export interface RowDefaults {
  /** --channel: rows without a channel cell; without it, an address with @ is email. */
  channel?: Channel;
  /**
   * --reason: rows without a reason, and rows whose reason is a text ENS does not know (kept as
   * their detail).
   */
  reason?: SuppressionReasonT;
  tenant: string;
}

const SCOPE = /^[^\s]{1,200}$/;

/** One row as the store's input, or why it is not one (reported with its line number). */
export function readRow(
  h: Header,
  cells: readonly string[],
  d: RowDefaults,
): SuppressionInput | { error: string } {
  const cell = (f: Field): string => (h[f] === undefined ? '' : (cells[h[f]!] ?? '').trim());
  const address = cell('address');
  if (address === '') return { error: 'no address' };
  const channelCell = cell('channel').toLowerCase();
  let channel: Channel;
  if (channelCell !== '') {
    if (!(CHANNELS as readonly string[]).includes(channelCell))
      return { error: `"${channelCell.slice(0, 40)}" is not a channel (${CHANNELS.join(', ')})` };
    channel = channelCell as Channel;
  } else if (d.channel) {
    channel = d.channel;
  } else if (address.includes('@')) {
    channel = 'email';
  } else {
    return { error: 'no channel: add a channel column or pass --channel' };
  }
  if (normaliseAddress(channel, address) === null)
    return {
      error: `"${address.slice(0, 100)}" is not ${channel === 'email' ? 'an' : 'a'} ${channel} address`,
    };
  let detail = cell('detail');
  const reasonCell = cell('reason');
  let reason: SuppressionReasonT;
  if (reasonCell === '') {
    reason = d.reason ?? 'manual';
  } else {
    const known = readReason(reasonCell);
    if (known) {
      reason = known;
    } else if (d.reason) {
      // SendGrid's bounce export: its reason column is the bounce's own words, the evidence.
      reason = d.reason;
      detail ||= reasonCell;
    } else {
      return {
        error: `"${reasonCell.slice(0, 60)}" is not a reason ENS knows (${SUPPRESSION_REASONS.join(', ')}); pass --reason to use one for such rows`,
      };
    }
  }
  const scope = cell('scope') || '*';
  if (!SCOPE.test(scope))
    return {
      error: `scope "${scope.slice(0, 40)}" is not * or an event type (no spaces, at most 200 characters)`,
    };
  const expires = cell('expires_at');
  if (expires !== '' && Number.isNaN(Date.parse(expires)))
    return { error: `expires_at "${expires.slice(0, 40)}" is not a date-time` };
  return {
    tenant: d.tenant,
    channel,
    address,
    scope,
    reason,
    source: 'import',
    createdBy: 'cli',
    detail: detail === '' ? null : detail,
    expiresAt: expires === '' ? null : new Date(expires).toISOString(),
  };
}
