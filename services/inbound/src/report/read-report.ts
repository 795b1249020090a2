import { simpleParser, type Attachment, type StructuredHeader } from 'mailparser';

/**
 * What kind of report a received message is, from its MIME structure (RFC 6522 multipart/report,
 * whose report-type parameter names the machine-readable part): a delivery status notification
 * (RFC 3464, RFC 6533) or a complaint feedback report (RFC 5965). mailparser splits the MIME and
 * decodes each part's transfer encoding; the parts' fields are read by delivery-status.ts and
 * feedback-report.ts.
 */
export type ReportMessage =
  | { type: 'delivery-status'; status: string }
  /**
   * `original`: the quoted message's header block and body (or its headers alone), when the report
   * has one.
   */
  | { type: 'feedback-report'; report: string; original: string | null }
  | { type: 'other'; why: string };

const DELIVERY_STATUS = new Set(['message/delivery-status', 'message/global-delivery-status']);
const ORIGINAL = new Set([
  'message/rfc822',
  'text/rfc822-headers',
  'message/global',
  'message/global-headers',
]);

const partText = (a: Attachment): string => a.content.toString('utf8');

export async function readReport(raw: Buffer): Promise<ReportMessage> {
  const options = {
    // Keep message/delivery-status as a part of its own (mailparser otherwise joins it to the
    // text).
    keepDeliveryStatus: true,
    // A quoted message/rfc822 stays one part, even marked inline (as RFC 5965's example is): its
    // header block is where a complaint's Return-Path is read. Passed on to mailparser's splitter
    // (@zone-eu/mailsplit), which @types/mailparser does not describe.
    ignoreEmbedded: true,
    // Only the structure is wanted: no html made from text, no text from html, no link detection.
    skipHtmlToText: true,
    skipTextToHtml: true,
    skipTextLinks: true,
    skipImageLinks: true,
  };
  const mail = await simpleParser(raw, options);
  const ct = mail.headers.get('content-type') as StructuredHeader | undefined;
  const type = ct?.value?.toLowerCase();
  const reportType = ct?.params?.['report-type']?.toLowerCase();
  if (type !== 'multipart/report')
    return { type: 'other', why: `not a report (Content-Type ${type ?? 'none'})` };
  if (reportType === 'delivery-status' || reportType === 'global-delivery-status') {
    const part = mail.attachments.find((a) => DELIVERY_STATUS.has(a.contentType.toLowerCase()));
    return part
      ? { type: 'delivery-status', status: partText(part) }
      : { type: 'other', why: 'a delivery-status report without a message/delivery-status part' };
  }
  if (reportType === 'feedback-report') {
    const part = mail.attachments.find(
      (a) => a.contentType.toLowerCase() === 'message/feedback-report',
    );
    if (!part)
      return { type: 'other', why: 'a feedback report without a message/feedback-report part' };
    const original = mail.attachments.find((a) => ORIGINAL.has(a.contentType.toLowerCase()));
    return {
      type: 'feedback-report',
      report: partText(part),
      original: original ? partText(original) : null,
    };
  }
  return { type: 'other', why: `a report of type ${reportType ?? 'none'}` };
}
