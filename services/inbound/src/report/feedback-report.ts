import {
  addressOf,
  first,
  readFieldBlocks,
  withoutComments,
  type FieldBlock,
} from './field-blocks.ts';

/**
 * A complaint feedback report's machine-readable part (ARF, RFC 5965 section 3.1), and the
 * return paths it quotes, through which ENS finds the delivery complained about.
 */

export interface FeedbackReport {
  /**
   * RFC 5965 3.1 (required), lower case: abuse, fraud, virus, other, not-spam (RFC 6650),
   * auth-failure (RFC 6591).
   */
  feedbackType: string;
  userAgent: string | null;
  /**
   * RFC 5965 3.2: the envelope sender of the message complained about, which for ENS mail is its
   * signed return path.
   */
  originalMailFrom: string | null;
  sourceIp: string | null;
  /** The evidence kept with the suppression entry. */
  detail: string;
}

/**
 * Feedback types that are a recipient's complaint about unwanted mail. `not-spam` is the
 * opposite; `auth-failure` reports a sender authentication failure, not a person's wish;
 * `other` says nothing ENS could act on.
 */
export const COMPLAINT_TYPES: ReadonlySet<string> = new Set(['abuse', 'fraud', 'virus']);

/** The report's fields, or null without the one required field ENS acts on (Feedback-Type). */
export function readFeedbackReport(text: string): FeedbackReport | null {
  const blocks = readFieldBlocks(text);
  if (!blocks || blocks.length === 0) return null;
  // RFC 5965 has one block; a stray blank line must not hide the fields after it.
  const fields = new Map<string, string[]>();
  for (const b of blocks) for (const [k, v] of b) fields.set(k, [...(fields.get(k) ?? []), ...v]);
  const block: FieldBlock = fields;
  const type = withoutComments(first(block, 'feedback-type') ?? '').toLowerCase();
  if (!/^[a-z0-9-]{1,64}$/.test(type)) return null;
  const userAgent = first(block, 'user-agent');
  const mailFrom = first(block, 'original-mail-from');
  const sourceIp = first(block, 'source-ip');
  const detail = [
    `Feedback-Type: ${type}`,
    userAgent && `User-Agent: ${userAgent}`,
    sourceIp && `Source-IP: ${sourceIp}`,
    first(block, 'arrival-date') && `Arrival-Date: ${first(block, 'arrival-date')}`,
  ]
    .filter(Boolean)
    .join('; ');
  return {
    feedbackType: type,
    userAgent,
    originalMailFrom: mailFrom === null ? null : addressOf(mailFrom),
    sourceIp,
    detail,
  };
}

/**
 * The Return-Path addresses in the header block of the message a report quotes (its
 * message/rfc822 or text/rfc822-headers part): the receiving MTA wrote them from the envelope
 * sender, so for ENS mail they are its signed return path. Only the header block is read.
 */
export function returnPathsOf(original: string): string[] {
  const end = original.search(/\r?\n\r?\n/);
  const head = (end < 0 ? original : original.slice(0, end)).slice(0, 256 * 1024);
  const blocks = readFieldBlocks(head);
  return (blocks?.[0]?.get('return-path') ?? [])
    .map(addressOf)
    .filter((a): a is string => a !== null);
}
