import { domainToASCII } from 'node:url';
import type { FieldError } from '../errors.ts';
import { normalisePhone } from '../phone.ts';
import type { Channel } from '../schemas/channel.ts';
import type { Content } from '../schemas/handoff.ts';

/*
 * What ENS knows of each channel, in one table. The list of channels is the plugin SDK's CHANNELS
 * (the SDK is published alone and imports no other workspace, so the list lives there); this table
 * is keyed by it, so a channel added to the list fails the typecheck until it has its row here.
 * The handoff rules (handoff-rules.ts), the OpenAPI send examples and the places that treat one
 * channel apart (push's devices, whatsapp's read receipts) read the row, never the channel's name.
 *
 * The conformance kit's sample message stays in the SDK (packages/plugin-sdk/src/conformance/
 * sample-message.ts) for the same reason; packages/core/test/channels.test.ts checks that every
 * channel's sample there is a message this table accepts.
 */

/**
 * A field of the content object (interface.md) that a channel may accept; `kind` is always given.
 */
export type ContentField = Exclude<keyof Content, 'kind'>;

export interface ChannelRules {
  /**
   * The content kind the channel takes (interface.md: rendered for sms, email and push; template
   * for whatsapp).
   */
  readonly kind: Content['kind'];
  /** What a recipient must be, as the validation message names it: `"…" is not <recipientIs>`. */
  readonly recipientIs: string;
  /**
   * The recipient as it is stored, deduplicated and sent (a delivery's `recipient`), or null when
   * `raw` is not one.
   */
  normaliseRecipient(raw: string): string | null;
  /** The content fields it accepts besides `kind`; a caller who sends another is told its name. */
  readonly fields: readonly ContentField[];
  /** Fields it requires whatever the kind (`body` is required of every rendered content). */
  readonly requires: readonly ContentField[];
  /**
   * The largest content it takes: the providers' own limits, with room for their envelopes (listed
   * in docs/reference/limits.md).
   */
  readonly limits: Readonly<Record<string, number>>;
  /**
   * Its own checks of a content of the right kind and fields: sizes, and what its providers refuse.
   */
  checkContent(content: Content, at: string, errors: FieldError[]): void;
  /**
   * A valid message entry: the OpenAPI document's send example for the channel
   * (test/api/openapi-live.test.ts posts it).
   */
  readonly sample: {
    readonly summary: string;
    readonly recipients: readonly string[];
    readonly content: Content;
  };
  /**
   * A recipient is a user, sent to each of their registered devices
   * (services/worker/src/push-fanout.ts).
   */
  readonly fansOutToDevices: boolean;
  /**
   * Its providers report delivered and read, which the record shows as delivered_at and read_at
   * (the spec fills them for no other channel).
   */
  readonly readReceipts: boolean;
  /** Its addresses as the suppression list keys them (consent/address.ts). */
  readonly address: SuppressionAddress;
  /**
   * An opt-out or complaint leaves the event types a client marks must-deliver (a password reset)
   * to be sent (store/suppressions.ts). False where the law reads a STOP as stopping everything.
   */
  readonly mustDeliverPassesOptOut: boolean;
}

/** A channel's addresses on the suppression list, and how the API, console and CLI name them. */
export interface SuppressionAddress {
  /** What one is, as a refusal names it: `"…" is not <is>`. */
  readonly is: string;
  /** Its form, with an example: shown after `is` in brackets. */
  readonly form: string;
  /** What to escape when it is one segment of a URL path, or null when nothing needs to be. */
  readonly inPath: string | null;
  /** The key an entry is stored under, or null when `v` (trimmed, not empty) is not one. */
  key(v: string): string | null;
  /**
   * The key is lower-cased whole. The accept already stores a recipient's domain in lower-case
   * ASCII and phone numbers in E.164, so SQL that matches a delivery's recipient to a key has
   * only to lower-case the recipient of these channels (consent/address.ts).
   */
  readonly foldsCase: boolean;
}

const PHONE_NUMBER = 'a phone number in E.164 (8 to 15 digits, optional +)';

/** The longest address any channel keys on (RFC 5321's path limit for email). */
export const MAX_ADDRESS = 254;

const PHONE_ADDRESS: SuppressionAddress = {
  is: 'a phone number',
  form: 'E.164, such as +15551230001',
  inPath: '+ is %2B',
  key: normalisePhone,
  foldsCase: false,
};

/**
 * An email's key is case-folded whole and its domain put in IDNA ASCII form (RFC 5890), so
 * `Ann@Bücher.example` and `ann@xn--bcher-kva.example` are one entry: a local part whose case
 * matters to its server is rare, and folding errs on the side of the recipient's choice.
 */
function emailKey(v: string): string | null {
  const at = v.lastIndexOf('@');
  if (at <= 0 || at === v.length - 1) return null;
  const local = v.slice(0, at);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: an address holds none
  if (/[\s@<>()[\],;:"\\]/.test(local) || /[\u0000-\u001f\u007f]/.test(local)) return null;
  const domain = domainToASCII(v.slice(at + 1).toLowerCase());
  if (domain === '' || !domain.includes('.') || domain.length > 253) return null;
  const address = `${local.toLowerCase()}@${domain}`;
  return address.length <= MAX_ADDRESS ? address : null;
}

// A pragmatic address check: one @, no spaces, a dot in the domain. RFC 5322 in full accepts
// addresses no relay will take, so the provider remains the final judge.
const EMAIL =
  /^[^\s@"<>()[\],;:]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

function normaliseEmail(raw: string): string | null {
  const v = raw.trim();
  if (!EMAIL.test(v) || v.length > 254) return null;
  // The domain is case-insensitive (RFC 5321 §2.4), so Ann@Example.com and Ann@example.com are
  // one recipient; the local part is left as given, since its case may matter to the server.
  const at = v.lastIndexOf('@');
  return v.slice(0, at + 1) + v.slice(at + 1).toLowerCase();
}

/**
 * What Meta refuses in a template's body parameters, caught at accept time rather than as a failed
 * send: any line break or control character (U+2028 and U+2029 included), and four or more spaces
 * in a row, counting every Unicode space (no-break spaces too).
 */
const BAD_PARAM =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the characters a parameter may not hold
  /[\u0000-\u001f\u007f-\u009f\u2028\u2029]|[ \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]{4,}/;

/** Characters of an sms body: Twilio's maximum message length (about ten concatenated segments). */
const SMS_BODY = 1600;
/** Characters of an email's body and of its html, each. */
const EMAIL_PART = 1_048_576;
/**
 * UTF-8 bytes of a push notification's subject, body and data together: FCM, APNs and Web Push each
 * cap the payload at 4 KB, envelope included.
 */
const PUSH_PAYLOAD = 3072;
/** Characters of one WhatsApp template parameter (a template body is at most 1,024). */
const WHATSAPP_PARAM = 1024;

/** The one row per channel. */
export const CHANNEL_RULES: { readonly [C in Channel]: ChannelRules } = {
  sms: {
    kind: 'rendered',
    recipientIs: PHONE_NUMBER,
    normaliseRecipient: normalisePhone,
    fields: ['body'],
    requires: [],
    limits: { bodyCharacters: SMS_BODY },
    checkContent(content, at, errors) {
      if (content.body !== undefined && content.body.length > SMS_BODY) {
        errors.push({
          path: `${at}/content/body`,
          message: `is ${content.body.length} characters; an sms body is at most ${SMS_BODY}`,
        });
      }
    },
    sample: {
      summary: 'An sms to two numbers',
      recipients: ['+15551230001', '+15551230002'],
      content: { kind: 'rendered', body: 'Your order 1001 has shipped.' },
    },
    fansOutToDevices: false,
    readReceipts: false,
    address: PHONE_ADDRESS,
    mustDeliverPassesOptOut: false,
  },
  email: {
    kind: 'rendered',
    recipientIs: 'an email address',
    normaliseRecipient: normaliseEmail,
    fields: ['body', 'subject', 'html', 'inline_images'],
    requires: [],
    limits: { partCharacters: EMAIL_PART },
    checkContent(content, at, errors) {
      for (const part of ['body', 'html'] as const) {
        const text = content[part];
        if (text !== undefined && text.length > EMAIL_PART) {
          errors.push({
            path: `${at}/content/${part}`,
            message: `is ${text.length} characters; an email's ${part} is at most ${EMAIL_PART}`,
          });
        }
      }
    },
    sample: {
      summary: 'An email with a text and an HTML part',
      recipients: ['ada@example.com'],
      content: {
        kind: 'rendered',
        subject: 'Your order has shipped',
        body: 'Order 1001 has shipped.',
        html: '<p>Order 1001 has shipped.</p>',
      },
    },
    fansOutToDevices: false,
    readReceipts: false,
    address: {
      is: 'an email address',
      form: 'name@domain',
      inPath: '@ is %40',
      key: emailKey,
      foldsCase: true,
    },
    mustDeliverPassesOptOut: true,
  },
  push: {
    kind: 'rendered',
    recipientIs: 'a user id',
    normaliseRecipient(raw) {
      const v = raw.trim();
      return v.length > 0 ? v : null;
    },
    fields: ['body', 'subject', 'data'],
    requires: [],
    limits: { payloadBytes: PUSH_PAYLOAD },
    checkContent(content, at, errors) {
      const bytes = Buffer.byteLength(
        JSON.stringify({ subject: content.subject, body: content.body, data: content.data }),
      );
      if (bytes > PUSH_PAYLOAD) {
        errors.push({
          path: `${at}/content`,
          message: `subject, body and data come to ${bytes} bytes; a push notification carries at most ${PUSH_PAYLOAD}`,
        });
      }
    },
    sample: {
      summary: "A push to every registered device of a user (recipients are the caller's user ids)",
      recipients: ['user-42'],
      content: {
        kind: 'rendered',
        subject: 'Shipped',
        body: 'Order 1001 is on its way.',
        data: { order: '1001' },
      },
    },
    fansOutToDevices: true,
    readReceipts: false,
    // A push user id is the caller's own, kept as given.
    address: {
      is: 'a user id',
      form: 'without control characters',
      inPath: null,
      // biome-ignore lint/suspicious/noControlCharactersInRegex: a user id holds none
      key: (v) => (/[\u0000-\u001f\u007f]/.test(v) ? null : v),
      foldsCase: false,
    },
    mustDeliverPassesOptOut: true,
  },
  whatsapp: {
    kind: 'template',
    recipientIs: PHONE_NUMBER,
    normaliseRecipient: normalisePhone,
    fields: ['template_name', 'language', 'body_params', 'url_button_suffix'],
    requires: ['template_name', 'language'],
    limits: { paramCharacters: WHATSAPP_PARAM },
    checkContent(content, at, errors) {
      content.body_params?.forEach((p, i) => {
        const path = `${at}/content/body_params/${i}`;
        if (p.length === 0) errors.push({ path, message: 'must not be empty' });
        else if (BAD_PARAM.test(p))
          errors.push({
            path,
            message:
              'must not contain a line break, a tab or other control character, or four or ' +
              'more spaces in a row',
          });
        else if (p.length > WHATSAPP_PARAM)
          errors.push({ path, message: `must be at most ${WHATSAPP_PARAM} characters` });
      });
    },
    sample: {
      summary: 'A whatsapp template message',
      recipients: ['+15551230004'],
      content: {
        kind: 'template',
        template_name: 'order_shipped',
        language: 'en',
        body_params: ['1001'],
      },
    },
    fansOutToDevices: false,
    readReceipts: true,
    address: PHONE_ADDRESS,
    mustDeliverPassesOptOut: false,
  },
};
