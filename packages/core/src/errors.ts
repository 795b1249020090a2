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

/** The one registry of error codes. Each factory fixes code and status; callers give the detail. */
export const Errors = {
  authRequired: () =>
    new HttpError('ENS_ERR_AUTH_TOKEN_REQUIRED', 401, 'This endpoint requires a client-credentials token.', {
      headers: { 'www-authenticate': 'Bearer' },
    }),
  oauthInvalidClient: () =>
    new HttpError('invalid_client', 401, 'Client authentication failed.', {
      headers: { 'www-authenticate': 'Basic realm="ens"' },
    }),
  oauthUnsupportedGrant: (grant: string) =>
    new HttpError('unsupported_grant_type', 400, `Grant type "${grant}" is not supported; use client_credentials.`),
  oauthInvalidRequest: (detail: string) => new HttpError('invalid_request', 400, detail),
  validation: (detail: string, errors: FieldError[]) =>
    new HttpError('ENS_ERR_VALIDATION', 400, detail, { errors }),
  badRequest: (detail: string) => new HttpError('ENS_ERR_BAD_REQUEST', 400, detail),
  idempotencyKeyMissing: () =>
    new HttpError('ENS_ERR_IDEMPOTENCY_KEY_MISSING', 400, 'The Idempotency-Key header is required on POST /v2/messages.'),
  idempotencyKeyReused: () =>
    new HttpError(
      'ENS_ERR_IDEMPOTENCY_KEY_REUSED',
      422,
      'This Idempotency-Key was already used with a different request body.',
    ),
  tenantNotProvisioned: (tenant: string) =>
    new HttpError(
      'ENS_ERR_TENANT_NOT_PROVISIONED',
      400,
      `Tenant "${tenant}" is not provisioned for this client; create it with POST /v2/tenants first.`,
    ),
  tenantNotFound: (tenant: string) =>
    new HttpError('ENS_ERR_TENANT_NOT_FOUND', 404, `Tenant "${tenant}" does not exist for this client.`),
  tenantInUse: (tenant: string) =>
    new HttpError('ENS_ERR_TENANT_IN_USE', 409, `Tenant "${tenant}" has messages and cannot be deleted.`),
  deviceNotFound: (userId: string, tenant: string) =>
    new HttpError('ENS_ERR_DEVICE_NOT_FOUND', 404, `User "${userId}" of tenant "${tenant}" has no device with this token.`),
  tooManyDevices: (userId: string, max: number) =>
    new HttpError('ENS_ERR_TOO_MANY_DEVICES', 409, `User "${userId}" already has ${max} devices; delete old ones before adding another.`),
  suppressionNotFound: (channel: string, address: string, tenant: string, scope?: string) =>
    new HttpError(
      'ENS_ERR_SUPPRESSION_NOT_FOUND',
      404,
      `${address} (${channel}) has no entry${scope === undefined ? '' : ` of scope "${scope}"`} on the suppression list of tenant "${tenant}".`,
    ),
  suppressionKept: (address: string, reason: string, scope: string) =>
    new HttpError(
      'ENS_ERR_SUPPRESSION_KEPT',
      409,
      `${address} has a standing ${reason} entry of scope "${scope}"; a soft_bounce does not replace it (it would lapse). DELETE the entry first to replace it.`,
    ),
  payloadTooLarge: (detail: string) => new HttpError('ENS_ERR_PAYLOAD_TOO_LARGE', 413, detail),
  rateLimited: (detail: string, retryAfterSeconds: number) =>
    new HttpError('ENS_ERR_RATE_LIMITED', 429, detail, {
      headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
    }),
  quotaExceeded: (channel: string, limit: number, retryAfterSeconds: number) =>
    new HttpError(
      'ENS_ERR_QUOTA_EXCEEDED',
      429,
      `The daily ${channel} quota of ${limit} messages for this client is used up; it resets at 00:00 UTC.`,
      { headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) } },
    ),
  notFound: (detail: string) => new HttpError('ENS_ERR_NOT_FOUND', 404, detail),
  unavailable: (retryAfterSeconds: number) =>
    new HttpError(
      'ENS_ERR_UNAVAILABLE',
      503,
      `ENS cannot reach its database just now. Retry after ${retryAfterSeconds} s with the same Idempotency-Key: a request that was recorded is answered as a replay, one that was not is accepted then.`,
      { headers: { 'retry-after': String(retryAfterSeconds) } },
    ),
  unsupportedMediaType: (detail: string) => new HttpError('ENS_ERR_UNSUPPORTED_MEDIA_TYPE', 415, detail),
} as const;
