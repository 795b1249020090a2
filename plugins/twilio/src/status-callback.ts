import type {
  PluginContext,
  StatusUpdate,
  WebhookRequest,
  WebhookResponse,
  WebhookRoute,
} from '@ens/plugin-sdk';
import { FORBIDDEN, signedParams } from './signature.ts';

/**
 * An empty TwiML document. Twilio reads no body from a status callback's answer, but it accepts
 * "200 OK, text/xml, valid TwiML" or "204, empty body" from every kind of webhook
 * (https://www.twilio.com/docs/api/errors/15003); `<Response/>` also stays harmless if an operator
 * points a number's incoming-message webhook here by mistake (it means "do not reply").
 */
const EMPTY_TWIML: WebhookResponse = {
  status: 200,
  body: '<Response/>',
  headers: { 'content-type': 'text/xml' },
};

/** Describes a failed delivery in last_error: "twilio: undelivered (error 30003)". */
export function failureReason(status: string, errorCode: string | undefined): string {
  return errorCode ? `twilio: ${status} (error ${errorCode})` : `twilio: ${status}`;
}

export interface StatusRouteOptions {
  authToken: string;
  /** The public URL Twilio calls and signs; without it, the URL as ENS saw the request. */
  statusCallbackUrl: string | undefined;
  context: PluginContext;
}

/**
 * POST /status: Twilio's message status callbacks
 * (https://www.twilio.com/docs/messaging/guides/outbound-message-status-in-status-callbacks).
 * Only the outcomes ENS records are reported: delivered, read (WhatsApp through Twilio) and the
 * failures undelivered/failed; queued, sending, sent and accepted are steps on the way.
 */
export function statusRoute(opts: StatusRouteOptions): WebhookRoute {
  return {
    method: 'POST',
    path: '/status',
    async handler(req: WebhookRequest): Promise<WebhookResponse> {
      const params = signedParams(
        req,
        opts.authToken,
        opts.statusCallbackUrl ?? req.url,
        opts.context.logger,
        'status callback',
      );
      if (!params) return FORBIDDEN;
      const one = (name: string) => params.get(name)?.[0];
      const sid = one('MessageSid') ?? one('SmsSid');
      const status = one('MessageStatus') ?? one('SmsStatus');
      if (!sid || !status) {
        opts.context.logger.warn(
          { hasSid: Boolean(sid), hasStatus: Boolean(status) },
          'twilio status callback without MessageSid or MessageStatus; nothing to report',
        );
        return EMPTY_TWIML;
      }
      // Twilio's status callbacks carry no event time (RawDlrDoneDate has neither seconds nor a
      // time zone), so the moment Twilio told us is the best time there is.
      const at = new Date();
      let update: StatusUpdate | undefined;
      if (status === 'delivered') update = { providerMessageId: sid, status: 'delivered', at };
      else if (status === 'read') update = { providerMessageId: sid, status: 'read', at };
      else if (status === 'undelivered' || status === 'failed') {
        update = {
          providerMessageId: sid,
          status: 'failed',
          at,
          error: failureReason(status, one('ErrorCode')),
        };
      }
      // A failing report propagates (the core answers 5xx) so the fault is seen, not swallowed.
      if (update) await opts.context.reportStatus(update);
      return EMPTY_TWIML;
    },
  };
}
