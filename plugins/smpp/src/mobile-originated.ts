import { bodyExcerpt, smsKeyword, type RecipientReport } from '@ens/plugin-sdk';
import { messageText } from './delivery-receipt.ts';

/**
 * Mobile-originated messages (a deliver_sm whose esm_class message type is 0, SMPP v3.4 5.2.12),
 * read for consent only: a STOP texted to one of our numbers is an opt-out from that sender and a
 * START lifts it, as carriers require. ENS takes no other inbound SMS.
 */

/** esm_class bits 2–5: the message type; 0 is a plain short message, 0x04 a delivery receipt. */
const ESM_CLASS_TYPE = 0x3c;
/**
 * type_of_number values (5.2.5) whose digits are not a whole international number, or not digits.
 */
const TON_NATIONAL = 0x02;
const TON_SUBSCRIBER = 0x04;
const TON_ALPHANUMERIC = 0x05;
const TON_ABBREVIATED = 0x06;

const str = (v: unknown) => (typeof v === 'string' ? v.trim() : '');
const digitsOf = (s: string) => (/^\+?\d+$/.test(s) ? s.replace(/^\+/, '') : null);

/**
 * True when the deliver_sm is a plain mobile-originated message (not a receipt or an
 * acknowledgement).
 */
export function isMobileOriginated(pdu: Readonly<Record<string, unknown>>): boolean {
  const esmClass = typeof pdu.esm_class === 'number' ? pdu.esm_class : 0;
  return (esmClass & ESM_CLASS_TYPE) === 0;
}

/**
 * The consent report a mobile-originated deliver_sm carries, or null when it is no STOP or START
 * keyword or its sender is not a whole phone number (a national or alphanumeric source_addr could
 * not be matched to anything ENS sent). `defaultSender` is the configured sourceAddr: a keyword
 * sent to it binds the tenants without a sender of their own.
 */
export function mobileOriginatedReport(
  pdu: Readonly<Record<string, unknown>>,
  defaultSender: string | undefined,
  now: Date,
): RecipientReport | null {
  if (!isMobileOriginated(pdu)) return null;
  const text = messageText(pdu.short_message) || messageText(pdu.message_payload) || '';
  const kind = smsKeyword(text);
  if (kind !== 'opt_out' && kind !== 'opt_in') return null;
  const ton = typeof pdu.source_addr_ton === 'number' ? pdu.source_addr_ton : 0;
  const from = digitsOf(str(pdu.source_addr));
  if (
    from === null ||
    from.startsWith('0') ||
    [TON_NATIONAL, TON_SUBSCRIBER, TON_ALPHANUMERIC, TON_ABBREVIATED].includes(ton)
  )
    return null;
  const to = str(pdu.destination_addr);
  if (to === '') return null;
  const toDigits = digitsOf(to);
  const defaultDigits = defaultSender === undefined ? null : digitsOf(defaultSender.trim());
  return {
    kind,
    address: `+${from}`,
    channel: 'sms',
    sender: {
      id: toDigits === null ? to : `+${toDigits}`,
      isDefault: toDigits !== null && toDigits === defaultDigits,
    },
    // deliver_sm carries no time for an MO (schedule_delivery_time is unused in it).
    at: now,
    detail: `smpp MO to ${to}: text "${bodyExcerpt(text, 40)}"`,
  };
}
