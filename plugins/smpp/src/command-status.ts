// biome-ignore-all lint/complexity/useSimpleNumberKeys: STATUS keys are hex, as in the SMPP spec
import {
  permanentError,
  rateLimitedError,
  recipientError,
  transientError,
  type ProviderError,
  type RecipientRefusal,
} from '@ens/plugin-sdk';

/**
 * SMPP command_status values: SMPP v3.4 section 5.1.3 (table 5-2), with the v5.0 additions an SMSC
 * speaking 5.0 to a 3.4 client may still answer. Names and descriptions are the specification's.
 */
export const STATUS: Record<number, readonly [name: string, description: string]> = {
  0x00: ['ESME_ROK', 'No Error'],
  0x01: ['ESME_RINVMSGLEN', 'Message Length is invalid'],
  0x02: ['ESME_RINVCMDLEN', 'Command Length is invalid'],
  0x03: ['ESME_RINVCMDID', 'Invalid Command ID'],
  0x04: ['ESME_RINVBNDSTS', 'Incorrect BIND Status for given command'],
  0x05: ['ESME_RALYBND', 'ESME Already in Bound State'],
  0x06: ['ESME_RINVPRTFLG', 'Invalid Priority Flag'],
  0x07: ['ESME_RINVREGDLVFLG', 'Invalid Registered Delivery Flag'],
  0x08: ['ESME_RSYSERR', 'System Error'],
  0x0a: ['ESME_RINVSRCADR', 'Invalid Source Address'],
  0x0b: ['ESME_RINVDSTADR', 'Invalid Destination Address'],
  0x0c: ['ESME_RINVMSGID', 'Message ID is invalid'],
  0x0d: ['ESME_RBINDFAIL', 'Bind Failed'],
  0x0e: ['ESME_RINVPASWD', 'Invalid Password'],
  0x0f: ['ESME_RINVSYSID', 'Invalid System ID'],
  0x11: ['ESME_RCANCELFAIL', 'Cancel SM Failed'],
  0x13: ['ESME_RREPLACEFAIL', 'Replace SM Failed'],
  0x14: ['ESME_RMSGQFUL', 'Message Queue Full'],
  0x15: ['ESME_RINVSERTYP', 'Invalid Service Type'],
  0x33: ['ESME_RINVNUMDESTS', 'Invalid number of destinations'],
  0x34: ['ESME_RINVDLNAME', 'Invalid Distribution List name'],
  0x40: ['ESME_RINVDESTFLAG', 'Destination flag is invalid'],
  0x42: ['ESME_RINVSUBREP', "Invalid 'submit with replace' request"],
  0x43: ['ESME_RINVESMCLASS', 'Invalid esm_class field data'],
  0x44: ['ESME_RCNTSUBDL', 'Cannot Submit to Distribution List'],
  0x45: ['ESME_RSUBMITFAIL', 'submit_sm or submit_multi failed'],
  0x48: ['ESME_RINVSRCTON', 'Invalid Source address TON'],
  0x49: ['ESME_RINVSRCNPI', 'Invalid Source address NPI'],
  0x50: ['ESME_RINVDSTTON', 'Invalid Destination address TON'],
  0x51: ['ESME_RINVDSTNPI', 'Invalid Destination address NPI'],
  0x53: ['ESME_RINVSYSTYP', 'Invalid system_type field'],
  0x54: ['ESME_RINVREPFLAG', 'Invalid replace_if_present flag'],
  0x55: ['ESME_RINVNUMMSGS', 'Invalid number of messages'],
  0x58: ['ESME_RTHROTTLED', 'Throttling error (ESME has exceeded allowed message limits)'],
  0x61: ['ESME_RINVSCHED', 'Invalid Scheduled Delivery Time'],
  0x62: ['ESME_RINVEXPIRY', 'Invalid message validity period (Expiry time)'],
  0x63: ['ESME_RINVDFTMSGID', 'Predefined Message Invalid or Not Found'],
  0x64: ['ESME_RX_T_APPN', 'ESME Receiver Temporary App Error Code'],
  0x65: ['ESME_RX_P_APPN', 'ESME Receiver Permanent App Error Code'],
  0x66: ['ESME_RX_R_APPN', 'ESME Receiver Reject Message Error Code'],
  0x67: ['ESME_RQUERYFAIL', 'query_sm request failed'],
  0xc0: ['ESME_RINVOPTPARSTREAM', 'Error in the optional part of the PDU Body'],
  0xc1: ['ESME_ROPTPARNOTALLWD', 'Optional Parameter not allowed'],
  0xc2: ['ESME_RINVPARLEN', 'Invalid Parameter Length'],
  0xc3: ['ESME_RMISSINGOPTPARAM', 'Expected Optional Parameter missing'],
  0xc4: ['ESME_RINVOPTPARAMVAL', 'Invalid Optional Parameter Value'],
  0xfe: ['ESME_RDELIVERYFAILURE', 'Delivery Failure'],
  0xff: ['ESME_RUNKNOWNERR', 'Unknown Error'],
  0x100: ['ESME_RSERTYPUNAUTH', 'ESME Not authorised to use specified service_type'],
  0x101: ['ESME_RPROHIBITED', 'ESME Prohibited from using specified operation'],
  0x102: ['ESME_RSERTYPUNAVAIL', 'Specified service_type is unavailable'],
  0x103: ['ESME_RSERTYPDENIED', 'Specified service_type is denied'],
  0x104: ['ESME_RINVDCS', 'Invalid Data Coding Scheme'],
  0x105: ['ESME_RINVSRCADDRSUBUNIT', 'Source Address Sub unit is Invalid'],
  0x106: ['ESME_RINVDSTADDRSUBUNIT', 'Destination Address Sub unit is Invalid'],
};

export const ESME_ROK = 0x00;
export const ESME_RTHROTTLED = 0x58;
export const ESME_RX_T_APPN = 0x64;

export const hex = (n: number): string => `0x${n.toString(16).toUpperCase().padStart(2, '0')}`;

export function statusName(status: number): string {
  return (
    STATUS[status]?.[0] ??
    (status >= 0x400 && status <= 0x4ff ? 'vendor-specific error' : 'unknown command_status')
  );
}

/** "ESME_RINVDSTADR (0x0B): Invalid Destination Address", the form errors and logs use. */
export function describeStatus(status: number): string {
  const known = STATUS[status];
  if (known) return `${known[0]} (${hex(status)}): ${known[1]}`;
  return `${statusName(status)} (${hex(status)})`;
}

/**
 * Refusals that say this message (its addresses, length, coding or flags) will never be accepted
 * as sent. Everything not listed is transient: the queue and system errors, throttling aside, and
 * also the account faults (bind, password, service_type authorisation), which the operator fixes
 * and which must count toward failover rather than fail messages for good. Vendor-specific and
 * unknown codes are transient too: an unexpected answer must not silently fail a message.
 */
const PERMANENT = new Set([
  0x01, 0x02, 0x03, 0x06, 0x07, 0x0a, 0x0b, 0x0c, 0x15, 0x33, 0x34, 0x40, 0x42, 0x43, 0x44, 0x48,
  0x49, 0x50, 0x51, 0x53, 0x54, 0x55, 0x61, 0x62, 0x63, 0x65, 0x66, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4,
  0x104, 0x105, 0x106,
]);

/**
 * The permanent refusals that are about the recipient, which ENS suppresses: ESME_RINVDSTADR, the
 * destination is not a number the SMSC can deliver to. Not ESME_RINVDSTTON/NPI: the plugin sends
 * every destination as international/ISDN, so an SMSC refusing that refuses the ESME's numbering
 * for every recipient alike (a setting to fix at the SMSC), and suppressing would punish the
 * numbers for it.
 */
const RECIPIENT_REFUSALS: ReadonlyMap<number, RecipientRefusal> = new Map([
  [0x0b, 'invalid_recipient'],
]);

export type StatusClass = 'ok' | 'rate_limited' | 'transient' | 'permanent';

export function classifyStatus(status: number): StatusClass {
  if (status === ESME_ROK) return 'ok';
  if (status === ESME_RTHROTTLED) return 'rate_limited';
  return PERMANENT.has(status) ? 'permanent' : 'transient';
}

/**
 * The error for a refused submit_sm; `detail` (e.g. which segment) goes after the SMSC's reason.
 */
export function submitError(status: number, detail?: string): ProviderError {
  const message = `smpp ${describeStatus(status)}${detail ? ` (${detail})` : ''}`;
  switch (classifyStatus(status)) {
    case 'rate_limited':
      // SMPP carries no retry hint: the worker's own back-off applies.
      return rateLimitedError(message);
    case 'permanent': {
      const refusal = RECIPIENT_REFUSALS.get(status);
      return refusal ? recipientError(message, refusal) : permanentError(message);
    }
    default:
      return transientError(message);
  }
}

/** Bind refusals that mean the credentials or account are wrong, not that the SMSC is unwell. */
export const AUTH_FAILURES = new Set([0x0d, 0x0e, 0x0f, 0x53]);
