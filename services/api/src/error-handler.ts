import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { Errors, type HttpError, isHttpError } from '@ens/core';
import { isDatabaseUnavailable } from '@ens/core/internal';

/** How long a caller is asked to wait while PostgreSQL is away: a restart or a fail-over. */
const UNAVAILABLE_RETRY_AFTER_S = 5;

const OAUTH_CODES = new Set([
  'invalid_client',
  'invalid_request',
  'unsupported_grant_type',
  'invalid_grant',
  'invalid_scope',
]);

/** Maps framework errors (body too large, bad JSON, bad content type) onto the registry. */
function fromFastify(e: FastifyError, req: FastifyRequest): HttpError | null {
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE': {
      // Fastify's own message does not give the limit; the route's options do (provider webhooks
      // have a smaller one of their own).
      const limit = req.routeOptions.bodyLimit ?? req.server.initialConfig.bodyLimit;
      const which = limit === req.server.initialConfig.bodyLimit ? ' (ENS_MAX_BODY_BYTES)' : '';
      return Errors.payloadTooLarge(
        `The request body is larger than the limit of ${limit} bytes${which}.`,
      );
    }
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return Errors.unsupportedMediaType('Send the body as application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return Errors.badRequest('The request body is empty; send a JSON object.');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return Errors.badRequest(`The request body is not valid JSON: ${e.message}`);
    default:
      if (e.statusCode === 400 && e.message) return Errors.badRequest(e.message);
      return null;
  }
}

/**
 * The one place where errors become HTTP answers: `{code, detail, errors?}` with the registry's
 * status. OAuth errors of the token endpoint also carry RFC 6749's `error` and `error_description`.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, req, reply) => {
    let e: HttpError | null = isHttpError(err) ? err : null;
    // JSON parse errors from Node itself arrive as SyntaxError with statusCode 400.
    if (!e && err instanceof SyntaxError)
      e = Errors.badRequest(`The request body is not valid JSON: ${err.message}`);
    if (!e && isDatabaseUnavailable(err)) {
      req.log.warn({ err: (err as Error).message }, 'PostgreSQL unreachable; answered 503');
      e = Errors.unavailable(UNAVAILABLE_RETRY_AFTER_S);
    }
    if (!e && err && typeof err === 'object' && 'code' in err)
      e = fromFastify(err as FastifyError, req);
    if (!e) {
      req.log.error({ err }, 'unhandled error');
      e = Errors.internal();
    }
    reply.code(e.status).headers(e.headers);
    // The spec and the issue give the token rejection's body as exactly {"detail": ...}.
    const body: Record<string, unknown> = OAUTH_CODES.has(e.code)
      ? { error: e.code, error_description: e.detail, code: e.code, detail: e.detail }
      : e.code === 'ENS_ERR_AUTH_TOKEN_REQUIRED'
        ? { detail: e.detail }
        : { code: e.code, detail: e.detail };
    if (e.errors) body.errors = e.errors;
    return reply.send(body);
  });
  app.setNotFoundHandler(async (req) => {
    throw Errors.notFound(`No route for ${req.method} ${req.url.split('?')[0]}.`);
  });
}
