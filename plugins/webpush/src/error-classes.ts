import {
  bodyExcerpt,
  deviceGoneError,
  permanentError,
  rateLimitedError,
  retryAfterMs,
  transientError,
  type ProviderError,
} from '@ens/plugin-sdk';

/**
 * The push service's reason in a line for last_error. Services answer in their own shapes:
 * Mozilla JSON {errno, message}, Apple JSON {reason}, Google plain text; anything else is the
 * text itself. The endpoint is a client's choice, so whatever comes back is cut to a short,
 * printable excerpt: an answer from an address that should not have been reachable never travels
 * back whole.
 */
export function describeBody(text: string): string {
  const t = text.trim();
  if (t === '') return '(no body)';
  let reason = t;
  try {
    const j = JSON.parse(t) as Record<string, unknown>;
    if (j !== null && typeof j === 'object') {
      if (typeof j.reason === 'string') reason = j.reason;
      else if (typeof j.message === 'string')
        reason = typeof j.errno === 'number' ? `errno ${j.errno}: ${j.message}` : j.message;
      else if (typeof j.error === 'string') reason = j.error;
    }
  } catch {
    // not JSON: use the text
  }
  return bodyExcerpt(reason);
}

export interface Answer {
  status: number;
  headers: Headers;
  body: string;
  /**
   * The push service's origin (never the full endpoint: its path is the subscription's capability).
   */
  origin: string;
  /** The VAPID identity the request was signed with. */
  app: string;
  /** Size of the encrypted body sent, in octets. */
  octets: number;
}

/** Classifies a push service's non-2xx answer (RFC 8030, RFC 8292). */
export function classifyAnswer(a: Answer): ProviderError {
  const why = describeBody(a.body);
  const s = a.status;
  const at = `push service ${a.origin}`;
  if (s === 404)
    return deviceGoneError(
      `webpush 404: ${at} no longer knows this subscription (expired): ${why}`,
    );
  if (s === 410)
    return deviceGoneError(
      `webpush 410: the subscription is gone (the browser unsubscribed): ${why}`,
    );
  if (s === 429)
    return rateLimitedError(
      `webpush 429: ${at} is throttling: ${why}`,
      retryAfterMs(a.headers.get('retry-after')),
    );
  if (s === 401 || s === 403) {
    // A configuration fault (keys, subject, or subscriptions made with another key): the operator
    // fixes it.
    return transientError(
      `webpush ${s}: ${at} refused the VAPID authorization of identity "${a.app}": ${why}`,
    );
  }
  if (s === 413)
    return permanentError(
      `webpush 413: ${at} refused the payload as too large (${a.octets} octets encrypted): ${why}`,
    );
  if (s === 400) return permanentError(`webpush 400: ${at} refused the request: ${why}`);
  if (s === 408 || s >= 500) return transientError(`webpush ${s}: ${at} failed: ${why}`);
  if (s >= 400) return permanentError(`webpush ${s}: ${at} refused the message: ${why}`);
  return transientError(`webpush ${s}: unexpected answer from ${at}: ${why}`);
}

/** fetch failures: timeouts and network errors are transient. */
export function classifyNetworkFailure(
  e: unknown,
  origin: string,
  timeoutMs: number,
): ProviderError {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError') {
    return transientError(
      `webpush: push service ${origin} did not answer within ${timeoutMs} ms`,
      e,
    );
  }
  if ((e as { code?: string })?.code === 'ENS_ERR_OUTBOUND_REFUSED') {
    // The subscription points at an address ENS may not reach (loopback, a private network, a
    // cloud metadata service): it will never be sent to.
    return permanentError(`webpush: the subscription's endpoint is refused: ${err.message}`, e);
  }
  const detail = err?.cause?.code ?? err?.cause?.message ?? err?.message ?? String(e);
  return transientError(
    `webpush: could not reach push service ${origin}: ${bodyExcerpt(String(detail))}`,
    e,
  );
}
