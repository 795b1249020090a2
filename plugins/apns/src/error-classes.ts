import {
  deviceGoneError,
  permanentError,
  rateLimitedError,
  transientError,
  type ProviderError,
} from '@ens/plugin-sdk';
import type { Http2Answer } from './http2-origin.ts';

/** What APNs said about a refused notification: the status and the {"reason", "timestamp"} body. */
export interface ApnsRefusal {
  status: number;
  reason: string;
  /** 410 only: ms since the epoch when APNs learnt the token was no longer valid for the topic. */
  timestamp?: number;
  retryAfterMs?: number;
}

export function refusalOf(a: Http2Answer): ApnsRefusal {
  let reason: string | undefined;
  let timestamp: number | undefined;
  try {
    const j = JSON.parse(a.body) as { reason?: unknown; timestamp?: unknown };
    if (typeof j.reason === 'string' && j.reason !== '') reason = j.reason;
    if (typeof j.timestamp === 'number' && Number.isFinite(j.timestamp)) timestamp = j.timestamp;
  } catch {
    // not Apple's JSON (a proxy page?): the status and the start of the text say what happened
  }
  const refusal: ApnsRefusal = {
    status: a.status,
    reason:
      reason ?? (a.body.trim() ? `(no reason) ${a.body.trim().slice(0, 120)}` : '(no reason)'),
  };
  if (timestamp !== undefined) refusal.timestamp = timestamp;
  const ra = a.headers['retry-after'];
  const seconds = typeof ra === 'string' && /^\d+$/.test(ra.trim()) ? Number(ra.trim()) : undefined;
  if (seconds !== undefined) refusal.retryAfterMs = seconds * 1000;
  return refusal;
}

/** Apple's 400 reasons that are about the connection, not the notification. */
const TRANSIENT_400 = new Set(['IdleTimeout']);
/**
 * 403 reasons: the credentials or key, a fault the operator fixes (and one that counts toward
 * failover).
 */
const CREDENTIAL_HINT =
  'check teamId, keyId and privateKey, and that the key is enabled for APNs in this environment';

/**
 * Maps a non-200 APNs answer onto ENS's error kinds. A device gone for good (BadDeviceToken,
 * Unregistered, ExpiredToken) is marked so ENS unregisters the token; reasons that no retry can
 * change are permanent with Apple's reason as last_error; Apple's own trouble is transient.
 */
export function errorFor(r: ApnsRefusal): ProviderError {
  const what = `apns ${r.status} ${r.reason}`;
  switch (r.status) {
    case 400:
      if (r.reason === 'BadDeviceToken')
        return deviceGoneError(
          `${what}: the token is malformed or from the other APNs environment`,
        );
      if (TRANSIENT_400.has(r.reason)) return transientError(what);
      return permanentError(what);
    case 403:
      return transientError(`${what}: ${CREDENTIAL_HINT}`);
    case 404:
    case 405:
    case 413:
      return permanentError(what);
    case 410: {
      const since =
        r.timestamp !== undefined
          ? ` (no longer valid since ${new Date(r.timestamp).toISOString()})`
          : '';
      return deviceGoneError(`${what}${since}`);
    }
    case 429:
      return rateLimitedError(what, r.retryAfterMs);
    default:
      // 500 InternalServerError, 503 ServiceUnavailable/Shutdown, and anything APNs does not
      // document (a proxy's 502, say): a retry, perhaps through another provider, may succeed.
      return transientError(what);
  }
}
