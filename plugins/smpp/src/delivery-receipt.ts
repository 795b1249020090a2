import type { StatusUpdate } from '@ens/plugin-sdk';

/**
 * SMSC delivery receipts (SMPP v3.4 section 5.2.12 esm_class, 5.3.2.12 receipted_message_id,
 * 5.3.2.35 message_state, appendix B "Delivery Receipt Format"). The receipt arrives as a
 * deliver_sm with esm_class bit 0x04; the id and state are in TLVs on SMSCs that send them, and
 * always in the de-facto text:
 *   id:IIIIIIIIII sub:SSS dlvrd:DDD submit date:YYMMDDhhmm done date:YYMMDDhhmm stat:DDDDDDD err:E text:...
 */

export const ESM_CLASS_RECEIPT = 0x04;

/**
 * message_state TLV values (SMPP v3.4 5.3.2.35, SKIPPED from v5.0) as the text receipt names them.
 */
const MESSAGE_STATE: Record<number, string> = {
  0: 'SCHEDULED',
  1: 'ENROUTE',
  2: 'DELIVRD',
  3: 'EXPIRED',
  4: 'DELETED',
  5: 'UNDELIV',
  6: 'ACCEPTD',
  7: 'UNKNOWN',
  8: 'REJECTD',
  9: 'SKIPPED',
};

/** Long forms some SMSCs write in the text instead of the appendix's seven-letter ones. */
const STAT_ALIASES: Record<string, string> = {
  DELIVERED: 'DELIVRD',
  UNDELIVERABLE: 'UNDELIV',
  UNDELIVERED: 'UNDELIV',
  REJECTED: 'REJECTD',
  ACCEPTED: 'ACCEPTD',
};

const FAILED = new Set(['UNDELIV', 'REJECTD', 'EXPIRED', 'DELETED', 'UNKNOWN', 'SKIPPED']);

export interface Receipt {
  messageId: string;
  /** The seven-letter state (DELIVRD, UNDELIV…), upper case. */
  stat: string;
  /** The network-specific error code, when the SMSC gave one. */
  err?: string;
  /** The "done date", when present and valid. */
  doneAt?: Date;
}

/** Text of short_message / message_payload as node-smpp decodes it ({ message } or raw octets). */
export function messageText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('latin1');
  if (v !== null && typeof v === 'object' && 'message' in v)
    return messageText((v as { message: unknown }).message);
  return undefined;
}

/** YYMMDDhhmm[ss], read as UTC (receipts carry no zone; most SMSCs run on UTC). */
export function parseReceiptDate(s: string): Date | undefined {
  const m = /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})?$/.exec(s);
  if (!m) return undefined;
  const [yy, mo, dd, hh, mi, ss] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '00'].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (mo < 1 || mo > 12 || dd < 1 || dd > 31 || hh > 23 || mi > 59 || ss > 59) return undefined;
  const d = new Date(Date.UTC(2000 + yy, mo - 1, dd, hh, mi, ss));
  return d.getUTCDate() === dd ? d : undefined; // 310231 is not a date
}

export interface TextReceipt {
  id?: string;
  stat?: string;
  err?: string;
  doneAt?: Date;
}

/**
 * The fields of the appendix B text; keys are matched case-insensitively, order does not matter.
 */
export function parseReceiptText(text: string): TextReceipt {
  const field = (name: string) => new RegExp(`(?:^|\\s)${name}:(\\S*)`, 'i').exec(text)?.[1];
  const stat = field('stat')?.toUpperCase();
  const done = field('done date');
  return {
    id: field('id') || undefined,
    stat: stat ? (STAT_ALIASES[stat] ?? stat) : undefined,
    err: field('err') || undefined,
    doneAt: done ? parseReceiptDate(done) : undefined,
  };
}

/** network_error_code TLV: network type (1 octet), then the error code (2 octets). */
function networkErrorCode(v: unknown): string | undefined {
  if (!Buffer.isBuffer(v) || v.length < 3) return undefined;
  return String(v.readUInt16BE(1)).padStart(3, '0');
}

/** Reads a receipt deliver_sm; null when it carries no message id or no state. */
export function parseReceipt(pdu: Readonly<Record<string, unknown>>): Receipt | null {
  const text = messageText(pdu.short_message) || messageText(pdu.message_payload) || '';
  const t = parseReceiptText(text);
  const tlvId =
    typeof pdu.receipted_message_id === 'string' && pdu.receipted_message_id !== ''
      ? pdu.receipted_message_id
      : undefined;
  const tlvState =
    typeof pdu.message_state === 'number' ? MESSAGE_STATE[pdu.message_state] : undefined;
  const messageId = tlvId ?? t.id;
  const stat = tlvState ?? t.stat;
  if (!messageId || !stat) return null;
  const err = t.err ?? networkErrorCode(pdu.network_error_code);
  return {
    messageId,
    stat,
    ...(err !== undefined ? { err } : {}),
    ...(t.doneAt ? { doneAt: t.doneAt } : {}),
  };
}

/**
 * The status update a receipt means: DELIVRD → delivered; final failures → failed with
 * "smpp: UNDELIV (err 001)"; intermediate states (ENROUTE, ACCEPTD, SCHEDULED) → null.
 */
export function receiptUpdate(r: Receipt, now: Date): StatusUpdate | null {
  const at = r.doneAt ?? now;
  if (r.stat === 'DELIVRD') return { providerMessageId: r.messageId, status: 'delivered', at };
  if (FAILED.has(r.stat)) {
    return {
      providerMessageId: r.messageId,
      status: 'failed',
      at,
      error: `smpp: ${r.stat}${r.err !== undefined ? ` (err ${r.err})` : ''}`,
    };
  }
  return null;
}
