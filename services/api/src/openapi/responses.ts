import { Type, type TSchema } from 'typebox';
import { ErrorBody } from '@ens/core';

/**
 * The error answers of the API as the OpenAPI document states them: one entry per status the
 * server really gives, each with what it means and the headers that come with it. The schemas
 * also serialise the answers, so each keeps every field the error handler writes.
 */

const RETRY_AFTER = {
  'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before retrying' },
};

/** `x-response-description` is @fastify/swagger's place for a response's own description. */
const answer = <T extends TSchema>(
  schema: T,
  description: string,
  headers?: Record<string, unknown>,
): TSchema =>
  ({
    ...schema,
    'x-response-description': description,
    ...(headers ? { headers } : {}),
  }) as TSchema;

export type ErrorStatus = 400 | 401 | 404 | 409 | 413 | 415 | 422 | 429 | 431 | 503;

const DEFAULTS: Record<ErrorStatus, string> = {
  400:
    'Invalid request: `errors` lists every problem with its JSON pointer (code ' +
    'ENS_ERR_VALIDATION or ENS_ERR_BAD_REQUEST)',
  401:
    'No valid, unexpired client-credentials token of an enabled client. The body is exactly ' +
    '`{"detail": ...}`.',
  404: 'Not found (ENS_ERR_NOT_FOUND or a resource-specific code)',
  409: 'Conflict with the current state',
  413:
    'The request body (ENS_MAX_BODY_BYTES) or an inline image (ENS_MAX_IMAGE_BYTES) is over its ' +
    'limit (ENS_ERR_PAYLOAD_TOO_LARGE)',
  415: 'The body is not application/json (ENS_ERR_UNSUPPORTED_MEDIA_TYPE)',
  422: 'This Idempotency-Key was already used with a different body (ENS_ERR_IDEMPOTENCY_KEY_REUSED)',
  431:
    'The request line and headers are over 16 KB (ENS_ERR_HEADERS_TOO_LARGE); send long values ' +
    'in the body',
  429:
    "The client's request rate (ENS_ERR_RATE_LIMITED) or a daily channel quota " +
    '(ENS_ERR_QUOTA_EXCEEDED) is used up',
  503:
    'PostgreSQL is unreachable just now (ENS_ERR_UNAVAILABLE); retry after Retry-After seconds, ' +
    'with the same Idempotency-Key for a send',
};

const HEADERS: Partial<Record<ErrorStatus, Record<string, unknown>>> = {
  401: { 'WWW-Authenticate': { type: 'string', const: 'Bearer' } },
  429: RETRY_AFTER,
  503: RETRY_AFTER,
};

/**
 * The documented error responses of an operation: each status given maps to its default
 * meaning, or to the route's own wording when a string is given for it.
 */
export function errorResponses(
  statuses: readonly ErrorStatus[],
  wording: Partial<Record<ErrorStatus, string>> = {},
): Record<number, TSchema> {
  return Object.fromEntries(
    statuses.map((s) => [s, answer(ErrorBody, wording[s] ?? DEFAULTS[s], HEADERS[s])]),
  );
}

/** What any path can answer: Node's HTTP parser refuses oversized headers before routing. */
export const ANY_PATH_ERRORS: readonly ErrorStatus[] = [431];

/** What every /v2/ operation can answer besides its own: token, request rate, database away. */
export const V2_ERRORS: readonly ErrorStatus[] = [401, 429, 503, ...ANY_PATH_ERRORS];

/** A success answer with its description. */
export const success = <T extends TSchema>(
  schema: T,
  description: string,
  headers?: Record<string, unknown>,
): TSchema => answer(schema, description, headers);

/** An answer without a body (204). */
export const noContent = (description: string): TSchema => answer(Type.Null(), description);

/**
 * The token endpoint's refusals: RFC 6749 §5.2's `error` and `error_description`, with ENS's
 * `code` and `detail` beside them.
 */
export const OAuthError = Type.Object({
  error: Type.Union(
    [
      Type.Literal('invalid_request'),
      Type.Literal('invalid_client'),
      Type.Literal('unsupported_grant_type'),
    ],
    { description: 'RFC 6749 §5.2 error code' },
  ),
  error_description: Type.String(),
  code: Type.String({ description: 'The same as `error`' }),
  detail: Type.String({ description: 'The same as `error_description`' }),
});

export const oauthResponse = (description: string, headers?: Record<string, unknown>): TSchema =>
  answer(OAuthError, description, headers);
