import {
  bodyExcerpt,
  smsKeyword,
  type PluginContext,
  type RecipientReportKind,
  type SmsKeyword,
  type WebhookRequest,
  type WebhookResponse,
  type WebhookRoute,
} from '@ens/plugin-sdk';
import { FORBIDDEN, signedParams } from './signature.ts';

/**
 * POST /inbound: Twilio's incoming-message webhook
 * (https://www.twilio.com/docs/messaging/guides/webhook-request), read for consent only. A STOP
 * texted to one of our numbers is an opt-out from that sender and a START lifts it, so ENS stops
 * sending before Twilio has to refuse (21610) and keeps the recipient's own words as evidence.
 * ENS takes no other inbound SMS: anything else is acknowledged and dropped.
 *
 * Twilio signs it as it signs status callbacks (X-Twilio-Signature over the URL it called and the
 * sorted POST parameters); a request that fails the check is refused before anything is read.
 */

const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>';
/** TwiML that sends no reply: Twilio already confirms STOP and START to the phone itself. */
const NO_REPLY: WebhookResponse = {
  status: 200,
  body: `${XML_DECLARATION}<Response></Response>`,
  headers: { 'content-type': 'text/xml' },
};

/**
 * Twilio's Advanced Opt-Out names the keyword's meaning, also for keywords of its own (localised
 * ones).
 */
const OPT_OUT_TYPE: Record<string, SmsKeyword> = { STOP: 'opt_out', START: 'opt_in', HELP: 'help' };

const xmlText = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
/** Numbers compare by digits: the config may say +15005550006 where Twilio posts the same. */
const digits = (n: string | undefined) => (n ?? '').replace(/[^0-9]/g, '');

export interface InboundRouteOptions {
  authToken: string;
  /** The public URL Twilio calls and signs; without it, the URL as ENS saw the request. */
  inboundUrl: string | undefined;
  /**
   * The plugin's default sender and Messaging Service: a STOP to them binds the tenants without a
   * sender of their own.
   */
  from: string | undefined;
  messagingServiceSid: string | undefined;
  /** The reply to HELP/INFO; none when absent. */
  helpText: string | undefined;
  context: PluginContext;
}

export function inboundRoute(opts: InboundRouteOptions): WebhookRoute {
  const help: WebhookResponse =
    opts.helpText === undefined
      ? NO_REPLY
      : {
          ...NO_REPLY,
          body: `${XML_DECLARATION}<Response><Message>${xmlText(opts.helpText)}</Message></Response>`,
        };
  return {
    method: 'POST',
    path: '/inbound',
    async handler(req: WebhookRequest): Promise<WebhookResponse> {
      const params = signedParams(
        req,
        opts.authToken,
        opts.inboundUrl ?? req.url,
        opts.context.logger,
        'inbound message',
      );
      if (!params) return FORBIDDEN;
      const one = (name: string) => params.get(name)?.[0];
      const from = one('From');
      const to = one('To');
      const body = one('Body') ?? '';
      const optOutType = one('OptOutType')?.toUpperCase();
      const meaning =
        (optOutType !== undefined ? OPT_OUT_TYPE[optOutType] : undefined) ?? smsKeyword(body);
      if (meaning === 'help') return help;
      if (meaning === null || meaning === undefined) return NO_REPLY;
      // A channel-prefixed address (whatsapp:+1…) is another product's message, not an SMS
      // sender's.
      if (!from || !to || /^[a-z]+:/i.test(from)) {
        opts.context.logger.warn(
          { hasFrom: Boolean(from), hasTo: Boolean(to) },
          'twilio inbound keyword without an SMS From and To; nothing to report',
        );
        return NO_REPLY;
      }
      const isDefault =
        (opts.from !== undefined && digits(to) === digits(opts.from)) ||
        (opts.messagingServiceSid !== undefined &&
          one('MessagingServiceSid') === opts.messagingServiceSid);
      const kind: RecipientReportKind = meaning;
      const said =
        optOutType !== undefined
          ? `OptOutType ${optOutType}, text "${bodyExcerpt(body, 40)}"`
          : `text "${bodyExcerpt(body, 40)}"`;
      // A failing report propagates (the core answers 5xx) so the fault is seen, not swallowed.
      await opts.context.reportRecipient({
        kind,
        address: from,
        channel: 'sms',
        sender: { id: to, isDefault },
        // Twilio's incoming-message webhook carries no time; the moment it reached us is the best
        // there is.
        at: new Date(),
        detail: `twilio inbound ${one('MessageSid') ?? 'message'} to ${to}: ${said}`,
      });
      return NO_REPLY;
    },
  };
}
