import { EnsError } from '@ens/plugin-sdk';

/**
 * API errors: the branch of ENS's error tree (see EnsError in @ens/plugin-sdk) that becomes an
 * HTTP answer. Each carries a stable code, the status it maps to and a `detail` the caller can
 * read; `Errors` below is the registry that makes them, and the API's error handler is the one
 * place that turns them into responses. Tests assert on `code`.
 */
export interface FieldError {
  path: string;
  message: string;
}

export interface HttpErrorOptions {
  errors?: FieldError[];
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * An API answer: an error with the HTTP status it maps to. The registry `Errors` makes every one.
 */
export class HttpError extends EnsError {
  static override readonly code: string = 'ENS_ERR_HTTP';
  readonly status: number;
  readonly errors: FieldError[] | undefined;
  readonly headers: Record<string, string>;

  constructor(code: string, status: number, detail: string, opts: HttpErrorOptions = {}) {
    super(detail, { code, cause: opts.cause });
    this.status = status;
    this.errors = opts.errors;
    this.headers = opts.headers ?? {};
  }
}

export function isHttpError(e: unknown): e is HttpError {
  return e instanceof HttpError;
}

/**
 * The one registry of error codes. Each factory fixes code and status; callers give the detail.
 * Each factory's doc comment says when the API answers it: docs/reference/errors.md is generated
 * from them (`npm run errors-doc`), and test/architecture/errors-doc.test.ts fails without one.
 */
export const Errors = {
  /**
   * a `/v2/` request without a valid, unexpired client-credentials token of an enabled client (body
   * `detail` only, as the interface says; `WWW-Authenticate: Bearer`).
   */
  authRequired: () =>
    new HttpError(
      'ENS_ERR_AUTH_TOKEN_REQUIRED',
      401,
      'This endpoint requires a client-credentials token.',
      {
        headers: { 'www-authenticate': 'Bearer' },
      },
    ),
  /** the token endpoint: client authentication failed (RFC 6749). */
  oauthInvalidClient: () =>
    new HttpError('invalid_client', 401, 'Client authentication failed.', {
      headers: { 'www-authenticate': 'Basic realm="ens"' },
    }),
  /** the token endpoint: a grant other than `client_credentials` (RFC 6749). */
  oauthUnsupportedGrant: (grant: string) =>
    new HttpError(
      'unsupported_grant_type',
      400,
      `Grant type "${grant}" is not supported; use client_credentials.`,
    ),
  /** the token endpoint: a malformed request, or one not form-encoded (RFC 6749). */
  oauthInvalidRequest: (detail: string) => new HttpError('invalid_request', 400, detail),
  /**
   * the body or query does not match its schema; `errors` lists every problem, each with a JSON
   * pointer `path`.
   */
  validation: (detail: string, errors: FieldError[]) =>
    new HttpError('ENS_ERR_VALIDATION', 400, detail, { errors }),
  /**
   * a body that is empty, not valid JSON, or carries a `__proto__` key; a URL that cannot be
   * decoded; a request Node's HTTP parser refuses; other requests that cannot be taken as they are.
   */
  badRequest: (detail: string) => new HttpError('ENS_ERR_BAD_REQUEST', 400, detail),
  /** `POST /v2/messages` without an `Idempotency-Key`. */
  idempotencyKeyMissing: () =>
    new HttpError(
      'ENS_ERR_IDEMPOTENCY_KEY_MISSING',
      400,
      'The Idempotency-Key header is required on POST /v2/messages.',
    ),
  /** an `Idempotency-Key` reused with another body. */
  idempotencyKeyReused: () =>
    new HttpError(
      'ENS_ERR_IDEMPOTENCY_KEY_REUSED',
      422,
      'This Idempotency-Key was already used with a different request body.',
    ),
  /** a handoff for a tenant the client has not created. */
  tenantNotProvisioned: (tenant: string) =>
    new HttpError(
      'ENS_ERR_TENANT_NOT_PROVISIONED',
      400,
      `Tenant "${tenant}" is not provisioned for this client; create it with POST /v2/tenants first.`,
    ),
  /** an unknown tenant. */
  tenantNotFound: (tenant: string) =>
    new HttpError(
      'ENS_ERR_TENANT_NOT_FOUND',
      404,
      `Tenant "${tenant}" does not exist for this client.`,
    ),
  /** deleting a tenant that still has messages. */
  tenantInUse: (tenant: string) =>
    new HttpError(
      'ENS_ERR_TENANT_IN_USE',
      409,
      `Tenant "${tenant}" has messages and cannot be deleted.`,
    ),
  /** deleting a push device the user does not have. */
  deviceNotFound: (userId: string, tenant: string) =>
    new HttpError(
      'ENS_ERR_DEVICE_NOT_FOUND',
      404,
      `User "${userId}" of tenant "${tenant}" has no device with this token.`,
    ),
  /** a user's 101st push device. */
  tooManyDevices: (userId: string, max: number) =>
    new HttpError(
      'ENS_ERR_TOO_MANY_DEVICES',
      409,
      `User "${userId}" already has ${max} devices; delete old ones before adding another.`,
    ),
  /** deleting a suppression entry that does not exist. */
  suppressionNotFound: (channel: string, address: string, tenant: string, scope?: string) =>
    new HttpError(
      'ENS_ERR_SUPPRESSION_NOT_FOUND',
      404,
      `${address} (${channel}) has no entry${scope === undefined ? '' : ` of scope "${scope}"`} on the suppression list of tenant "${tenant}".`,
    ),
  /** a `soft_bounce` entry that would replace a standing entry of another reason. */
  suppressionKept: (address: string, reason: string, scope: string) =>
    new HttpError(
      'ENS_ERR_SUPPRESSION_KEPT',
      409,
      `${address} has a standing ${reason} entry of scope "${scope}"; a soft_bounce does not replace it (it would lapse). DELETE the entry first to replace it.`,
    ),
  /** a body or inline image over its limit. */
  payloadTooLarge: (detail: string) => new HttpError('ENS_ERR_PAYLOAD_TOO_LARGE', 413, detail),
  /** over the client's request rate, or the token endpoint's limits; `Retry-After`. */
  rateLimited: (detail: string, retryAfterSeconds: number) =>
    new HttpError('ENS_ERR_RATE_LIMITED', 429, detail, {
      headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
    }),
  /** the client's daily quota for the channel is used up; `Retry-After` until 00:00 UTC. */
  quotaExceeded: (channel: string, limit: number, retryAfterSeconds: number) =>
    new HttpError(
      'ENS_ERR_QUOTA_EXCEEDED',
      429,
      `The daily ${channel} quota of ${limit} messages for this client is used up; it resets at 00:00 UTC.`,
      { headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) } },
    ),
  /** no route for the method and path. */
  notFound: (detail: string) => new HttpError('ENS_ERR_NOT_FOUND', 404, detail),
  /**
   * ENS cannot reach its database just now; `Retry-After`, and retrying with the same
   * `Idempotency-Key` is safe.
   */
  unavailable: (retryAfterSeconds: number) =>
    new HttpError(
      'ENS_ERR_UNAVAILABLE',
      503,
      `ENS cannot reach its database just now. Retry after ${retryAfterSeconds} s with the same Idempotency-Key: a request that was recorded is answered as a replay, one that was not is accepted then.`,
      { headers: { 'retry-after': String(retryAfterSeconds) } },
    ),
  /** a `/v2/` request that is not JSON. */
  unsupportedMediaType: (detail: string) =>
    new HttpError('ENS_ERR_UNSUPPORTED_MEDIA_TYPE', 415, detail),
  /**
   * the request line and headers are over 16 KB (Node's HTTP parser refuses them before any route);
   * send long values in the body.
   */
  headersTooLarge: () =>
    new HttpError(
      'ENS_ERR_HEADERS_TOO_LARGE',
      431,
      'The request line and headers are larger than 16 KB; send long values in the body.',
    ),
  /**
   * an error ENS did not expect; it is logged with the request id the answer's `x-request-id`
   * header gives.
   */
  internal: () =>
    new HttpError(
      'ENS_ERR_INTERNAL',
      500,
      'Internal error; the request id in the x-request-id header identifies it in the logs.',
    ),
} as const;
