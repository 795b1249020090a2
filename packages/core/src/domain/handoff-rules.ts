import { Errors, type FieldError } from '../errors.ts';
import { normalisePhone } from '../phone.ts';
import { CHANNELS, type Channel } from '../schemas/channel.ts';
import type { Content, Handoff, MessageEntry } from '../schemas/handoff.ts';

/** Which content kind each channel takes (spec: rendered for sms, email, push; template for whatsapp). */
const KIND_FOR: Record<Channel, Content['kind']> = { sms: 'rendered', email: 'rendered', push: 'rendered', whatsapp: 'template' };

const RENDERED = CHANNELS.filter((c) => KIND_FOR[c] === 'rendered');
const TEMPLATED = CHANNELS.filter((c) => KIND_FOR[c] === 'template');

/** Content fields that only some channels accept; anything else is a caller mistake worth naming. */
const FIELD_CHANNELS: Partial<Record<keyof Content, readonly Channel[]>> = {
  body: RENDERED,
  subject: ['email', 'push'],
  html: ['email'],
  inline_images: ['email'],
  data: ['push'],
  template_name: TEMPLATED,
  language: TEMPLATED,
  body_params: TEMPLATED,
  url_button_suffix: TEMPLATED,
};

const PHONE_NUMBER = 'a phone number in E.164 (8 to 15 digits, optional +)';
/** What a recipient must be on each channel, as the validation message names it. */
const RECIPIENT_IS: Record<Channel, string> = {
  sms: PHONE_NUMBER,
  whatsapp: PHONE_NUMBER,
  email: 'an email address',
  push: 'a user id',
};

// A pragmatic address check: one @, no spaces, a dot in the domain. RFC 5322 in full accepts
// addresses no relay will take, so the provider remains the final judge.
const EMAIL = /^[^\s@"<>()[\],;:]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
/**
 * What Meta refuses in a template's body parameters, caught at accept time rather than as a failed
 * send: any line break or control character (U+2028 and U+2029 included), and four or more spaces
 * in a row, counting every Unicode space (no-break spaces too).
 */
const BAD_PARAM = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]|[ \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]{4,}/;

/**
 * The largest content each channel takes, so a body no provider would carry is refused at the
 * door instead of being stored and sent to fail. The numbers are the providers' own limits (with
 * room for their envelopes) and are listed in the README.
 */
export const CONTENT_LIMITS = {
  /** Characters of an sms body: Twilio's maximum message length (about ten concatenated segments). */
  smsBody: 1600,
  /** Characters of an email's body and of its html, each. */
  emailPart: 1_048_576,
  /** UTF-8 bytes of a push notification's subject, body and data together: FCM, APNs and Web Push each cap the payload at 4 KB, envelope included. */
  pushPayload: 3072,
  /** Characters of one WhatsApp template parameter (a template body is at most 1,024). */
  whatsappParam: 1024,
} as const;

export interface PlannedDelivery {
  channel: Channel;
  recipient: string;
}

export interface RuleLimits {
  maxRecipients: number;
}

function normaliseRecipient(channel: Channel, raw: string): string | null {
  switch (channel) {
    case 'sms':
    case 'whatsapp':
      return normalisePhone(raw);
    case 'email': {
      const v = raw.trim();
      if (!EMAIL.test(v) || v.length > 254) return null;
      // The domain is case-insensitive (RFC 5321 §2.4), so Ann@Example.com and Ann@example.com are
      // one recipient; the local part is left as given, since its case may matter to the server.
      const at = v.lastIndexOf('@');
      return v.slice(0, at + 1) + v.slice(at + 1).toLowerCase();
    }
    case 'push': {
      const v = raw.trim();
      return v.length > 0 ? v : null;
    }
  }
}

function checkContent(entry: MessageEntry, at: string, errors: FieldError[]): void {
  const { channel, content } = entry;
  const wanted = KIND_FOR[channel];
  if (content.kind !== wanted) {
    errors.push({ path: `${at}/content/kind`, message: `${channel} takes kind "${wanted}", not "${content.kind}"` });
  }
  for (const [field, channels] of Object.entries(FIELD_CHANNELS) as [keyof Content, readonly Channel[]][]) {
    if (content[field] !== undefined && !channels.includes(channel)) {
      errors.push({ path: `${at}/content/${field}`, message: `${field} is not accepted for ${channel}` });
    }
  }
  if (content.kind === 'rendered' && content.body === undefined) {
    errors.push({ path: `${at}/content/body`, message: 'body is required when kind is rendered' });
  }
  if (channel === 'whatsapp') {
    if (content.template_name === undefined) {
      errors.push({ path: `${at}/content/template_name`, message: 'template_name is required for whatsapp' });
    }
    if (content.language === undefined) {
      errors.push({ path: `${at}/content/language`, message: 'language is required for whatsapp' });
    }
    content.body_params?.forEach((p, i) => {
      const path = `${at}/content/body_params/${i}`;
      if (p.length === 0) errors.push({ path, message: 'must not be empty' });
      else if (BAD_PARAM.test(p)) errors.push({ path, message: 'must not contain a line break, a tab or other control character, or four or more spaces in a row' });
      else if (p.length > CONTENT_LIMITS.whatsappParam) errors.push({ path, message: `must be at most ${CONTENT_LIMITS.whatsappParam} characters` });
    });
  }
  checkSize(entry, at, errors);
  if (content.inline_images !== undefined) {
    if (content.html === undefined) {
      errors.push({ path: `${at}/content/html`, message: 'html is required when inline_images are sent' });
    }
    const seen = new Set<string>();
    content.inline_images.forEach((img, i) => {
      if (seen.has(img.cid)) errors.push({ path: `${at}/content/inline_images/${i}/cid`, message: `cid "${img.cid}" is repeated` });
      seen.add(img.cid);
    });
  }
}

function checkSize(entry: MessageEntry, at: string, errors: FieldError[]): void {
  const { channel, content } = entry;
  if (channel === 'sms' && content.body !== undefined && content.body.length > CONTENT_LIMITS.smsBody) {
    errors.push({ path: `${at}/content/body`, message: `is ${content.body.length} characters; an sms body is at most ${CONTENT_LIMITS.smsBody}` });
  }
  if (channel === 'email') {
    for (const part of ['body', 'html'] as const) {
      const text = content[part];
      if (text !== undefined && text.length > CONTENT_LIMITS.emailPart) {
        errors.push({ path: `${at}/content/${part}`, message: `is ${text.length} characters; an email's ${part} is at most ${CONTENT_LIMITS.emailPart}` });
      }
    }
  }
  if (channel === 'push') {
    const bytes = Buffer.byteLength(JSON.stringify({ subject: content.subject, body: content.body, data: content.data }));
    if (bytes > CONTENT_LIMITS.pushPayload) {
      errors.push({ path: `${at}/content`, message: `subject, body and data come to ${bytes} bytes; a push notification carries at most ${CONTENT_LIMITS.pushPayload}` });
    }
  }
}

/**
 * Applies the spec's rules that a JSON schema cannot express, and plans one delivery per distinct
 * (normalised) recipient per channel. Throws ENS_ERR_VALIDATION listing every problem at once, so a
 * caller fixes a request in one round.
 */
export function planDeliveries(handoff: Handoff, limits: RuleLimits): PlannedDelivery[] {
  const errors: FieldError[] = [];
  const planned: PlannedDelivery[] = [];
  const channels = new Set<Channel>();
  handoff.messages.forEach((entry, i) => {
    const at = `/messages/${i}`;
    if (channels.has(entry.channel)) {
      errors.push({ path: `${at}/channel`, message: `channel ${entry.channel} appears more than once; send one entry per channel` });
    }
    channels.add(entry.channel);
    checkContent(entry, at, errors);
    if (entry.recipients.length > limits.maxRecipients) {
      errors.push({ path: `${at}/recipients`, message: `at most ${limits.maxRecipients} recipients per entry` });
      return;
    }
    const seen = new Set<string>();
    entry.recipients.forEach((raw, j) => {
      const recipient = normaliseRecipient(entry.channel, raw);
      if (recipient === null) {
        errors.push({ path: `${at}/recipients/${j}`, message: `"${raw}" is not ${RECIPIENT_IS[entry.channel]}` });
        return;
      }
      if (seen.has(recipient)) return;
      seen.add(recipient);
      planned.push({ channel: entry.channel, recipient });
    });
  });
  if (errors.length > 0) {
    const first = errors[0]!;
    throw Errors.validation(`Invalid handoff: ${first.path} ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`, errors);
  }
  return planned;
}
