import { permanentError, type OutboundMessage } from '@ens/plugin-sdk';
import { MAX_SEGMENTS, concatUdh, encodeText } from './sms-encoding.ts';

/** SMPP v3.4 5.2.5 / 5.2.6: type of number and numbering plan indicator. */
const TON_UNKNOWN = 0x00;
const TON_INTERNATIONAL = 0x01;
const TON_ALPHANUMERIC = 0x05;
const NPI_UNKNOWN = 0x00;
const NPI_ISDN = 0x01;
/** esm_class bit saying short_message starts with a user data header. */
export const ESM_CLASS_UDHI = 0x40;

export interface Address {
  ton: number;
  npi: number;
  addr: string;
}

/** The recipient, E.164 with '+', as SMPP wants it: the digits, international, E.164 plan. */
export function destinationAddress(recipient: string): Address {
  const digits = recipient.startsWith('+') ? recipient.slice(1) : recipient;
  if (!/^[1-9]\d{1,14}$/.test(digits))
    throw permanentError(`smpp: recipient ${recipient} is not an E.164 phone number`);
  return { ton: TON_INTERNATIONAL, npi: NPI_ISDN, addr: digits };
}

/**
 * The sender: a number (digits, '+' allowed) goes as international/ISDN, anything else as an
 * alphanumeric id (TON 5, NPI 0). Without one, source_addr is empty and the SMSC uses the
 * account's default sender.
 */
export function sourceAddress(sender: string | undefined): Address {
  const s = sender?.trim() ?? '';
  if (s === '') return { ton: TON_UNKNOWN, npi: NPI_UNKNOWN, addr: '' };
  const digits = s.startsWith('+') ? s.slice(1) : s;
  if (/^\d+$/.test(digits)) return { ton: TON_INTERNATIONAL, npi: NPI_ISDN, addr: digits };
  return { ton: TON_ALPHANUMERIC, npi: NPI_UNKNOWN, addr: s };
}

/**
 * The submit_sm parameters for one message: one per segment. Long texts go as concatenated
 * segments, each its own submit_sm with a UDH, rather than one submit_sm with message_payload:
 * every SMSC takes UDH segments, while message_payload support and its length limits vary by
 * operator, and a segmented submit gets per-segment answers the SMSC actually checked.
 */
export function submitParams(
  m: OutboundMessage,
  opts: { defaultSender: string | undefined; registeredDelivery: boolean; concatRef: number },
): Record<string, unknown>[] {
  const body = m.content.body;
  if (typeof body !== 'string' || body === '')
    throw permanentError('smpp: the sms content has no body to send');
  const dest = destinationAddress(m.recipient);
  const senderSetting = m.tenantSettings.sender_id;
  const src = sourceAddress(
    typeof senderSetting === 'string' && senderSetting.trim() !== ''
      ? senderSetting
      : opts.defaultSender,
  );
  const { dataCoding, segments } = encodeText(body);
  if (segments.length > MAX_SEGMENTS) {
    throw permanentError(
      `smpp: the text needs ${segments.length} segments; concatenated SMS allows ${MAX_SEGMENTS}`,
    );
  }
  const total = segments.length;
  return segments.map((payload, i) => ({
    service_type: '',
    source_addr_ton: src.ton,
    source_addr_npi: src.npi,
    source_addr: src.addr,
    dest_addr_ton: dest.ton,
    dest_addr_npi: dest.npi,
    destination_addr: dest.addr,
    esm_class: total > 1 ? ESM_CLASS_UDHI : 0x00,
    registered_delivery: opts.registeredDelivery ? 0x01 : 0x00,
    data_coding: dataCoding,
    // Octets, so node-smpp sends them untouched (a string would go through its own encoder).
    short_message:
      total > 1 ? Buffer.concat([concatUdh(opts.concatRef, total, i + 1), payload]) : payload,
  }));
}
