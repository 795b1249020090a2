import {
  permanentError,
  rateLimitedError,
  recipientError,
  retryAfterMs,
  transientError,
  type ProviderError,
  type RecipientRefusal,
} from '@ens/plugin-sdk';

/**
 * Twilio's REST error body:
 * https://www.twilio.com/docs/usage/twilios-response#response-formats-exceptions
 */
export interface TwilioErrorBody {
  code?: number;
  message?: string;
  more_info?: string;
  status?: number;
}

const TOO_MANY_REQUESTS = 20429;

/**
 * Refusals about the recipient, which ENS suppresses (https://www.twilio.com/docs/api/errors):
 * 21211 the To number is not a valid phone number, 21614 it is not a mobile number (a landline),
 * 21610 the recipient texted STOP to this sender. Not here: 21612 (not reachable from this
 * sender) and 21408 (region not enabled) are about the sender or the account, and another sender
 * or a setting fixes them.
 */
const RECIPIENT_REFUSALS: ReadonlyMap<number, RecipientRefusal> = new Map([
  [21211, 'invalid_recipient'],
  [21614, 'invalid_recipient'],
  [21610, 'opt_out'],
]);

function parseErrorBody(text: string): TwilioErrorBody | null {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as TwilioErrorBody) : null;
  } catch {
    return null;
  }
}

/**
 * "twilio 21211: The 'To' number … is not a valid phone number." — Twilio's own words become
 * last_error.
 */
function describe(status: number, body: TwilioErrorBody | null, text: string): string {
  if (body && typeof body.code === 'number' && typeof body.message === 'string')
    return `twilio ${body.code}: ${body.message}`;
  if (body && typeof body.message === 'string') return `twilio: HTTP ${status}: ${body.message}`;
  const snippet = text.replace(/\s+/g, ' ').trim().slice(0, 200);
  return snippet ? `twilio: HTTP ${status}: ${snippet}` : `twilio: HTTP ${status}`;
}

/**
 * Classifies a non-success answer of the REST API. Credential and addressing faults (401, 403,
 * 404) are transient: they are the operator's configuration, not the message's fault, and must
 * count toward failover instead of failing every message for good.
 */
export function classifyResponse(
  status: number,
  text: string,
  retryAfter: string | null,
): ProviderError {
  const body = parseErrorBody(text);
  const reason = describe(status, body, text);
  // A reason without Twilio's code already names the HTTP status; one with it gets the status
  // added.
  const withStatus = (hint?: string) => {
    const parts = [typeof body?.code === 'number' ? `HTTP ${status}` : undefined, hint].filter(
      Boolean,
    );
    return parts.length > 0 ? `${reason} (${parts.join(': ')})` : reason;
  };
  if (status === 429 || body?.code === TOO_MANY_REQUESTS)
    return rateLimitedError(reason, retryAfterMs(retryAfter));
  if (status >= 500) return transientError(withStatus());
  if (status === 401 || status === 403) {
    return transientError(
      withStatus(
        'Twilio refused the credentials; check accountSid and authToken or apiKeySid/apiKeySecret',
      ),
    );
  }
  if (status === 404) return transientError(withStatus('check baseUrl and accountSid'));
  const refusal = typeof body?.code === 'number' ? RECIPIENT_REFUSALS.get(body.code) : undefined;
  return refusal ? recipientError(reason, refusal) : permanentError(reason);
}

/** fetch rejects on network faults and on the timeout's abort; both are worth retrying. */
export function classifyFetchFailure(e: unknown, timeoutMs: number): ProviderError {
  const name = (e as { name?: unknown } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError')
    return transientError(`twilio: no answer within ${timeoutMs} ms`, e);
  const cause = (e as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  const detail =
    typeof cause?.code === 'string'
      ? cause.code
      : typeof cause?.message === 'string'
        ? cause.message
        : ((e as Error)?.message ?? String(e));
  return transientError(`twilio: request failed: ${detail}`, e);
}
