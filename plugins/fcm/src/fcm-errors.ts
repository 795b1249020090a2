import {
  deviceGoneError,
  permanentError,
  rateLimitedError,
  retryAfterMs,
  transientError,
  type ProviderError,
} from '@ens/plugin-sdk';
import { snippet } from './access-token.ts';

const FCM_ERROR_TYPE = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const BAD_REQUEST_TYPE = 'type.googleapis.com/google.rpc.BadRequest';

/** The `error` member of a Google API error body (google.rpc.Status in JSON). */
export interface GoogleError {
  code?: number;
  message?: string;
  status?: string;
  details?: Record<string, unknown>[];
}

/** A refused send, as read off the HTTP answer. */
export interface SendFailure {
  httpStatus: number;
  /** Absent when the body was not a Google error (a proxy's page, an empty body). */
  error: GoogleError | undefined;
  text: string;
  retryAfterMs: number | undefined;
}

export function readFailure(
  httpStatus: number,
  retryAfter: string | null,
  text: string,
  now = Date.now(),
): SendFailure {
  let error: GoogleError | undefined;
  try {
    const body = JSON.parse(text) as { error?: unknown };
    if (body && typeof body.error === 'object' && body.error !== null)
      error = body.error as GoogleError;
  } catch {
    // not JSON: classified by the HTTP status alone
  }
  return { httpStatus, error, text, retryAfterMs: retryAfterMs(retryAfter, now) };
}

/** The FCM-specific code (google.firebase.fcm.v1.FcmError.errorCode) the details carry, if any. */
export function fcmErrorCode(e: GoogleError | undefined): string | undefined {
  for (const d of e?.details ?? []) {
    if (
      d?.['@type'] === FCM_ERROR_TYPE &&
      typeof d.errorCode === 'string' &&
      d.errorCode !== 'UNSPECIFIED_ERROR'
    )
      return d.errorCode;
  }
  return undefined;
}

function fieldViolations(e: GoogleError | undefined): { field: string; description: string }[] {
  const out: { field: string; description: string }[] = [];
  for (const d of e?.details ?? []) {
    if (d?.['@type'] !== BAD_REQUEST_TYPE || !Array.isArray(d.fieldViolations)) continue;
    for (const v of d.fieldViolations as { field?: unknown; description?: unknown }[]) {
      out.push({ field: String(v?.field ?? ''), description: String(v?.description ?? '') });
    }
  }
  return out;
}

/**
 * A 401 that a fresh access token may cure: FCM refused our OAuth token (expired, revoked). Not
 * THIRD_PARTY_AUTH_ERROR, also a 401, which is about the APNs/Web Push credentials stored at
 * Firebase and which no token of ours changes.
 */
export function isAccessTokenRefused(f: SendFailure): boolean {
  const code = fcmErrorCode(f.error);
  return f.httpStatus === 401 && code !== 'THIRD_PARTY_AUTH_ERROR' && code !== 'APNS_AUTH_ERROR';
}

/**
 * FCM reports an unusable registration token as INVALID_ARGUMENT, telling it apart from other bad
 * arguments by a field violation on `message.token` or by its message ("The registration token is
 * not a valid FCM registration token").
 */
function isInvalidRegistrationToken(e: GoogleError | undefined): boolean {
  if (fieldViolations(e).some((v) => v.field === 'message.token')) return true;
  return /registration token/i.test(e?.message ?? '');
}

/**
 * The provider's reason, as it becomes last_error: "fcm UNREGISTERED: Requested entity was not
 * found."
 */
function reason(f: SendFailure, code: string | undefined): string {
  const e = f.error;
  if (!e) return `fcm HTTP ${f.httpStatus}: ${snippet(f.text)}`;
  const base = `fcm ${code ?? e.status ?? `HTTP ${f.httpStatus}`}: ${e.message ?? '(no message)'}`;
  const extra = fieldViolations(e)
    .filter((v) => v.description !== '' && v.description !== e.message)
    .map((v) => `${v.field}: ${v.description}`);
  return extra.length > 0 ? `${base} (${extra.join('; ')})` : base;
}

/**
 * Classifies a refused send by the FCM error code of the details first (it is the documented,
 * specific one: UNREGISTERED comes with status NOT_FOUND, SENDER_ID_MISMATCH with
 * PERMISSION_DENIED), then by the canonical status, then by the HTTP status.
 */
export function classifySendFailure(f: SendFailure): ProviderError {
  const fcmCode = fcmErrorCode(f.error);
  const code = fcmCode ?? f.error?.status;
  const why = reason(f, code);
  switch (code) {
    case 'UNREGISTERED':
      return deviceGoneError(why);
    case 'INVALID_ARGUMENT':
      return isInvalidRegistrationToken(f.error) ? deviceGoneError(why) : permanentError(why);
    case 'SENDER_ID_MISMATCH':
      // The token is alive but belongs to another Firebase project; deleting it would break the
      // app for whoever configured that project. Permanent for this send only.
      return permanentError(
        `${why} (the device token belongs to another Firebase project than the one configured)`,
      );
    case 'QUOTA_EXCEEDED':
    case 'RESOURCE_EXHAUSTED':
      return rateLimitedError(why, f.retryAfterMs);
    case 'UNAVAILABLE':
    case 'INTERNAL':
      // FCM asks senders to honour Retry-After on these; with it the hint steers the retry.
      return f.retryAfterMs !== undefined
        ? rateLimitedError(why, f.retryAfterMs)
        : transientError(why);
    case 'THIRD_PARTY_AUTH_ERROR':
    case 'APNS_AUTH_ERROR': // its name in older FCM documentation
      // The APNs key/certificate or Web Push credentials uploaded to Firebase are missing or
      // invalid: a configuration fault the operator fixes in the Firebase console, so transient
      // (retried, counted toward failover), never a dead device.
      return transientError(
        `${why} (the APNs or Web Push credentials configured in the Firebase project are missing or invalid)`,
      );
    case 'UNAUTHENTICATED':
      return transientError(`${why} (FCM refused the service account's access token)`);
    case 'PERMISSION_DENIED':
      // The service account may not send for this project (role missing, API disabled, wrong
      // project id).
      return transientError(`${why} (check the service account's permissions and the project id)`);
    case 'NOT_FOUND':
      // A Google error with NOT_FOUND on messages:send is about the target token (the Admin SDKs
      // read it as "registration token not registered").
      return deviceGoneError(why);
    default:
      break;
  }
  const s = f.httpStatus;
  if (s === 429) return rateLimitedError(why, f.retryAfterMs);
  if (s >= 500 || s === 408)
    return f.retryAfterMs !== undefined && s === 503
      ? rateLimitedError(why, f.retryAfterMs)
      : transientError(why);
  // 401/403 (credentials, permissions) and a 404 without a Google error body (a wrong baseUrl or a
  // proxy) are configuration faults, not answers about the message.
  if (s === 401 || s === 403 || s === 404) return transientError(why);
  return permanentError(why);
}
