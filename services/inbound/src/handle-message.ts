import type { Runtime } from '@ens/core';
import { suppressionReports } from '@ens/core/internal';
import { deliveryOfQuoted, type InboundRecipient, type RecipientRules } from './recipient.ts';
import { bounceOf, readDeliveryStatus } from './report/delivery-status.ts';
import { COMPLAINT_TYPES, readFeedbackReport, returnPathsOf } from './report/feedback-report.ts';
import { readReport, type ReportMessage } from './report/read-report.ts';

/**
 * What the inbound role does with one received message, to one recipient it took at RCPT TO:
 *   - to a return path: a delivery status notification that says the message failed or is
 *     delayed becomes a hard or soft bounce of that delivery; a complaint feedback report, a
 *     complaint;
 *   - to the feedback-loop address: a complaint feedback report, matched to its delivery through
 *     the signed return path it quotes (RFC 5965 Original-Mail-From, or the quoted message's
 *     Return-Path), never through anything unsigned;
 *   - to an unsubscribe mailto: an opt-out of that delivery's event type, whatever the mail says.
 * Everything else is refused with a 5xx and changes nothing. The store marks a bounce or
 * complaint on the delivery (bounced_at, complained_at; its status stays) and suppresses the
 * address; the suppression store wakes the feed after its commit when the delivery changed.
 */

export type Acted = 'hard_bounce' | 'soft_bounce' | 'complaint' | 'opt_out';
export type Refused = 'not_report' | 'malformed' | 'not_actionable' | 'unknown_delivery';

export type Outcome =
  | { accepted: true; result: Acted; deliveryId: string }
  | { accepted: false; result: Refused; code: number; message: string };

const refuse = (result: Refused, code: number, message: string): Outcome => ({
  accepted: false,
  result,
  code,
  message,
});

/**
 * Enhanced codes after DATA (RFC 3463): 5.6.0 bad content, 5.1.1 no such delivery, 5.7.1 not wanted
 * here.
 */
const NOT_REPORT = (why: string) =>
  refuse(
    'not_report',
    550,
    `5.7.1 Only delivery status notifications and feedback reports are taken here (${why})`,
  );
const MALFORMED = (why: string) => refuse('malformed', 554, `5.6.0 Malformed report: ${why}`);
const UNKNOWN = refuse(
  'unknown_delivery',
  550,
  '5.1.1 No such message: the report names nothing this service sent',
);

/**
 * Decides and records. Throws only when recording failed (PostgreSQL away): the caller answers
 * 451 so the sender retries.
 */
export async function handleMessage(
  rt: Runtime,
  rules: RecipientRules,
  to: InboundRecipient,
  raw: Buffer,
): Promise<Outcome> {
  const at = new Date();
  if (to.kind === 'unsubscribe') {
    const r = await rt.suppressions.reportForDelivery(
      { deliveryId: to.deliveryId },
      {
        kind: 'opt_out',
        source: 'unsubscribe',
        provider: 'smtp',
        detail: 'unsubscribe by mail (List-Unsubscribe mailto)',
        at,
        scopeToEventType: true,
      },
    );
    return recorded(r, 'opt_out', 'unsubscribe');
  }

  let report: ReportMessage;
  try {
    report = await readReport(raw);
  } catch (e) {
    return MALFORMED(
      `the MIME structure cannot be read (${(e as Error)?.message ?? String(e)})`.slice(0, 300),
    );
  }
  if (report.type === 'other') return NOT_REPORT(report.why);

  if (report.type === 'delivery-status') {
    // A bounce is about the delivery whose return path it was sent to; the feedback address gets
    // none.
    if (to.kind !== 'return-path')
      return NOT_REPORT('a delivery status notification to the feedback address');
    const status = readDeliveryStatus(report.status);
    if (!status) return MALFORMED('no recipient block with an Action and a Status (RFC 3464)');
    const bounce = bounceOf(status);
    if (!bounce)
      return refuse(
        'not_actionable',
        550,
        '5.7.1 The report says the message was delayed, delivered, relayed or expanded: ' +
          'nothing to record',
      );
    const r = await rt.suppressions.reportForDelivery(
      { deliveryId: to.deliveryId },
      { kind: bounce.kind, source: 'bounce_mail', provider: 'smtp', detail: bounce.detail, at },
    );
    return recorded(r, bounce.kind, 'bounce_mail');
  }

  const fr = readFeedbackReport(report.report);
  if (!fr) return MALFORMED('no Feedback-Type (RFC 5965)');
  if (!COMPLAINT_TYPES.has(fr.feedbackType))
    return refuse(
      'not_actionable',
      550,
      `5.7.1 Feedback-Type ${fr.feedbackType} is not a complaint: nothing to record`,
    );
  const deliveryId =
    to.kind === 'return-path'
      ? to.deliveryId
      : quotedDelivery(rules, fr.originalMailFrom, report.original);
  if (!deliveryId) return UNKNOWN;
  const r = await rt.suppressions.reportForDelivery(
    { deliveryId },
    { kind: 'complaint', source: 'complaint_mail', provider: 'smtp', detail: fr.detail, at },
  );
  return recorded(r, 'complaint', 'complaint_mail');
}

/**
 * The first signed return path the report quotes: its Original-Mail-From, then the original's
 * Return-Path.
 */
function quotedDelivery(
  rules: RecipientRules,
  originalMailFrom: string | null,
  original: string | null,
): string | null {
  const candidates = [
    ...(originalMailFrom ? [originalMailFrom] : []),
    ...(original ? returnPathsOf(original) : []),
  ];
  for (const c of candidates) {
    const id = deliveryOfQuoted(rules, c);
    if (id) return id;
  }
  return null;
}

function recorded(
  r: { deliveryId: string } | null,
  kind: Acted,
  source: 'bounce_mail' | 'complaint_mail' | 'unsubscribe',
): Outcome {
  // A valid token for a delivery retention has removed (or a delivery id that never was).
  if (!r) return UNKNOWN;
  suppressionReports.inc({ source, kind });
  return { accepted: true, result: kind, deliveryId: r.deliveryId };
}
