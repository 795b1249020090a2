import { addressOf, first, readFieldBlocks, withoutComments } from './field-blocks.ts';

/**
 * A delivery status notification's machine-readable part (RFC 3464 section 2; RFC 6533's
 * message/global-delivery-status has the same fields in UTF-8), and what it says about the
 * delivery it came back for.
 *
 * No npm library parses DSNs on their own and is maintained (bounce handling lives inside MTAs
 * such as Haraka's plugins, or in other languages' libraries); mailparser splits the MIME, and
 * this reads the fields.
 */

export interface RecipientStatus {
  /** RFC 3464 2.3.2 (required): the address the reporting MTA tried, e.g. `nobody@example.org`. */
  finalRecipient: string | null;
  /** RFC 3464 2.3.1: the address as ENS gave it (after DSN extensions), when the MTA kept it. */
  originalRecipient: string | null;
  /** RFC 3464 2.3.3 (required): failed, delayed, delivered, relayed or expanded. */
  action: string;
  /** RFC 3464 2.3.4 (required): the RFC 3463 status code, e.g. `5.1.1`. */
  status: string;
  /** RFC 3464 2.3.6: the remote MTA's own words, e.g. `smtp; 550 5.1.1 user unknown`. */
  diagnosticCode: string | null;
  remoteMta: string | null;
}

export interface DeliveryStatus {
  reportingMta: string | null;
  recipients: RecipientStatus[];
}

export interface Bounce {
  kind: 'hard_bounce' | 'soft_bounce';
  /** The evidence kept with the suppression entry: status, the MTA's words, who said so. */
  detail: string;
  recipient: RecipientStatus;
}

const STATUS = /^([245])\.(\d{1,3})\.(\d{1,3})$/;
const ACTIONS = new Set(['failed', 'delayed', 'delivered', 'relayed', 'expanded']);

/**
 * The report's fields, or null when it has no recipient block with a known Action and a
 * well-formed Status (a report ENS cannot act on is refused, never guessed at).
 */
export function readDeliveryStatus(text: string): DeliveryStatus | null {
  const blocks = readFieldBlocks(text);
  if (!blocks || blocks.length === 0) return null;
  // The per-message block is the first one, unless the MTA left it out (then every block that
  // has an Action is a recipient's).
  const [head, ...rest] = blocks;
  const perMessage = head!.has('action') ? null : head!;
  const recipients: RecipientStatus[] = [];
  for (const b of perMessage ? rest : blocks) {
    const action = withoutComments(first(b, 'action') ?? '').toLowerCase();
    // RFC 3464 2.3.4: the code, then optional text (`5.0.0 (permanent failure)`, `4.0.0 host lookup
    // failure`).
    const status = withoutComments(first(b, 'status') ?? '').split(/\s/)[0] ?? '';
    if (!ACTIONS.has(action) || !STATUS.test(status)) continue;
    const final = first(b, 'final-recipient');
    const original = first(b, 'original-recipient');
    recipients.push({
      finalRecipient: final === null ? null : addressOf(final),
      originalRecipient: original === null ? null : addressOf(original),
      action,
      status,
      diagnosticCode: first(b, 'diagnostic-code'),
      remoteMta: first(b, 'remote-mta'),
    });
  }
  if (recipients.length === 0) return null;
  return { reportingMta: perMessage ? first(perMessage, 'reporting-mta') : null, recipients };
}

/**
 * What the report says about the one recipient ENS sent to (a return path is per delivery, so a
 * report to it is about that delivery's recipient; several recipient blocks come from an address
 * the remote side expanded, and the worst of them counts):
 *   - Action failed with a 5.x.x status: a hard bounce (the remote side will not take it);
 *   - Action failed with 4.x.x (an MTA that gave up retrying): a soft bounce;
 *   - delayed (a warning: the MTA is still trying, and the message may yet arrive), delivered,
 *     relayed, expanded: nothing; null. Suppressing on a delay warning would hold back the next
 *     message to a mailbox that is only slow today.
 */
export function bounceOf(report: DeliveryStatus): Bounce | null {
  const hard = report.recipients.find((r) => r.action === 'failed' && r.status.startsWith('5.'));
  const soft = report.recipients.find((r) => r.action === 'failed' && r.status.startsWith('4.'));
  const r = hard ?? soft;
  if (!r) return null;
  const said = r.diagnosticCode ? `: ${r.diagnosticCode}` : '';
  const who = report.reportingMta ? ` (Reporting-MTA ${report.reportingMta})` : '';
  const to = r.finalRecipient ? ` for ${r.finalRecipient}` : '';
  return {
    kind: hard ? 'hard_bounce' : 'soft_bounce',
    recipient: r,
    detail: `${r.action} ${r.status}${to}${said}${who}`,
  };
}
