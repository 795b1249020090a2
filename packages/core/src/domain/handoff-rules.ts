import { Errors, type FieldError } from '../errors.ts';
import type { Channel } from '../schemas/channel.ts';
import { Content, type Handoff, type MessageEntry } from '../schemas/handoff.ts';
import { CHANNEL_RULES, type ContentField } from './channels.ts';

/** The content fields in the schema's order, which is the order their problems are listed in. */
const CONTENT_FIELDS = Object.keys(Content.properties).filter(
  (f): f is ContentField => f !== 'kind',
);

export interface PlannedDelivery {
  channel: Channel;
  recipient: string;
}

export interface RuleLimits {
  maxRecipients: number;
}

function checkContent(entry: MessageEntry, at: string, errors: FieldError[]): void {
  const { channel, content } = entry;
  const rules = CHANNEL_RULES[channel];
  if (content.kind !== rules.kind) {
    errors.push({
      path: `${at}/content/kind`,
      message: `${channel} takes kind "${rules.kind}", not "${content.kind}"`,
    });
  }
  for (const field of CONTENT_FIELDS) {
    if (content[field] !== undefined && !rules.fields.includes(field)) {
      errors.push({
        path: `${at}/content/${field}`,
        message: `${field} is not accepted for ${channel}`,
      });
    }
  }
  if (content.kind === 'rendered' && content.body === undefined) {
    errors.push({ path: `${at}/content/body`, message: 'body is required when kind is rendered' });
  }
  for (const field of rules.requires) {
    if (content[field] === undefined)
      errors.push({
        path: `${at}/content/${field}`,
        message: `${field} is required for ${channel}`,
      });
  }
  rules.checkContent(content, at, errors);
  if (content.inline_images !== undefined) {
    if (content.html === undefined) {
      errors.push({
        path: `${at}/content/html`,
        message: 'html is required when inline_images are sent',
      });
    }
    const seen = new Set<string>();
    content.inline_images.forEach((img, i) => {
      if (seen.has(img.cid))
        errors.push({
          path: `${at}/content/inline_images/${i}/cid`,
          message: `cid "${img.cid}" is repeated`,
        });
      seen.add(img.cid);
    });
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
      errors.push({
        path: `${at}/channel`,
        message: `channel ${entry.channel} appears more than once; send one entry per channel`,
      });
    }
    channels.add(entry.channel);
    checkContent(entry, at, errors);
    if (entry.recipients.length > limits.maxRecipients) {
      errors.push({
        path: `${at}/recipients`,
        message: `at most ${limits.maxRecipients} recipients per entry`,
      });
      return;
    }
    const seen = new Set<string>();
    entry.recipients.forEach((raw, j) => {
      const recipient = CHANNEL_RULES[entry.channel].normaliseRecipient(raw);
      if (recipient === null) {
        errors.push({
          path: `${at}/recipients/${j}`,
          message: `"${raw}" is not ${CHANNEL_RULES[entry.channel].recipientIs}`,
        });
        return;
      }
      if (seen.has(recipient)) return;
      seen.add(recipient);
      planned.push({ channel: entry.channel, recipient });
    });
  });
  if (errors.length > 0) {
    const first = errors[0]!;
    throw Errors.validation(
      `Invalid handoff: ${first.path} ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`,
      errors,
    );
  }
  return planned;
}
