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
 * Turns a Graph API error answer into ENS's three kinds. Meta asks integrators to key on `code`
 * (and error_data.details), not on titles or HTTP statuses, so the code decides first and the
 * HTTP status only when the code is one this table does not know.
 * https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes
 */

export interface GraphError {
  message?: string;
  type?: string;
  code?: number;
  error_subcode?: number;
  error_data?: { messaging_product?: string; details?: string };
  fbtrace_id?: string;
}

/** Throughput, spam and pair limits, plus the Graph app/account call-rate limits. */
const RATE_LIMITED = new Set([4, 80007, 130429, 131048, 131056]);

/** Meta's own trouble: unknown error, service unavailable, "something went wrong". */
const TRANSIENT = new Set([1, 2, 131000, 131016]);

/**
 * The operator's configuration is at fault (expired or wrong token, missing permission). Retrying
 * cannot fix it, but it is not the message's fault either: transient, so it counts toward failover
 * and the message goes out once the operator fixes the token.
 */
const CONFIGURATION = new Set([0, 3, 10, 190]);
const isPermissionCode = (code: number) => code >= 200 && code <= 299;

/** Faults of this message or recipient (bad parameter, template, number, 24-hour window…). */
const PERMANENT = new Set([
  100, 131008, 131009, 131026, 131030, 131047, 131050, 131051, 132000, 132001, 132005, 132007,
  132012, 133010,
]);

/**
 * The refusals that are about the recipient, which ENS suppresses, by Meta's error codes:
 * 131026 "Message undeliverable" (the number is not on WhatsApp, or its owner has not accepted
 * the terms of service or runs an app too old for business messages), 131050 the user stopped
 * marketing messages from this business (an entry for that event type only: an order update or a
 * one-time code still goes). Not here: 131030 (the number is not on a test account's
 * allowed list: the operator adds it) and 131047 (the 24-hour window: a template goes through).
 * Read by the send path and by the status webhook alike.
 */
export const RECIPIENT_REFUSALS: ReadonlyMap<number, RecipientRefusal> = new Map([
  [131026, 'invalid_recipient'],
  [131050, 'opt_out'],
]);

/** The refusals that cover the refused message's kind alone (its event type). */
export const EVENT_TYPE_ONLY_REFUSALS: ReadonlySet<number> = new Set([131050]);

export function graphErrorOf(body: unknown): GraphError | undefined {
  const e = (body as { error?: unknown } | null)?.error;
  return e !== null && typeof e === 'object' ? (e as GraphError) : undefined;
}

/**
 * "whatsapp <code>: <message> (<details>)"; Meta prefixes messages with "(#<code>) ", dropped as a
 * repeat.
 */
export function describeGraphError(e: GraphError): string {
  const code = typeof e.code === 'number' ? e.code : Number(e.code);
  const raw = typeof e.message === 'string' && e.message !== '' ? e.message : 'no message';
  const message = raw.replace(/^\(#\d+\)\s*/, '');
  const details = e.error_data?.details;
  return `whatsapp ${Number.isFinite(code) ? code : '?'}: ${message}${typeof details === 'string' && details !== '' && details !== message ? ` (${details})` : ''}`;
}

/**
 * Classifies one non-2xx answer; `text` is the body as received, for answers that are not Graph
 * JSON.
 */
export function classifyGraphAnswer(
  status: number,
  text: string,
  retryAfter: string | null,
): ProviderError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const e = graphErrorOf(parsed);
  const hint = retryAfterMs(retryAfter);
  if (e && e.code !== undefined && Number.isFinite(Number(e.code))) {
    const code = Number(e.code);
    const msg = describeGraphError(e);
    if (RATE_LIMITED.has(code)) return rateLimitedError(msg, hint);
    if (TRANSIENT.has(code)) return transientError(msg);
    if (CONFIGURATION.has(code) || isPermissionCode(code))
      return transientError(`${msg} [configuration: check the access token and its permissions]`);
    const refusal = RECIPIENT_REFUSALS.get(code);
    if (refusal)
      return recipientError(msg, refusal, undefined, {
        eventTypeOnly: EVENT_TYPE_ONLY_REFUSALS.has(code),
      });
    if (PERMANENT.has(code)) return permanentError(msg);
    return byStatus(status, msg, hint);
  }
  const snippet = text.trim().slice(0, 200);
  return byStatus(
    status,
    `whatsapp HTTP ${status}: ${snippet === '' ? 'empty answer' : snippet}`,
    hint,
  );
}

function byStatus(status: number, msg: string, hint: number | undefined): ProviderError {
  if (status === 429) return rateLimitedError(msg, hint);
  if (status === 401 || status === 403)
    return transientError(`${msg} [configuration: check the access token and its permissions]`);
  if (status >= 500 || status < 400) return transientError(msg);
  return permanentError(msg);
}
