import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { Errors, type ClientStore } from '@ens/core';
import { verifySecret } from '@ens/core/internal';
import type { TokenRateLimits } from '../limits/rate-limits.ts';
import { ANY_PATH_ERRORS, errorResponses, oauthResponse, success } from '../openapi/responses.ts';
import { CLIENT_CREDENTIALS, type AccessTokens } from './access-token.ts';

const TokenResponse = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer({ description: 'Seconds the token is valid (ENS_TOKEN_TTL)' }),
  scope: Type.String(),
});

/** RFC 6749 §4.4.2's form. The client authenticates with these fields or with HTTP Basic. */
const TokenForm = Type.Object({
  grant_type: Type.Literal('client_credentials'),
  client_id: Type.Optional(Type.String({ description: 'Unless given by HTTP Basic' })),
  client_secret: Type.Optional(Type.String({ description: 'Unless given by HTTP Basic' })),
});

const NO_STORE = {
  'Cache-Control': { type: 'string', const: 'no-store' },
  Pragma: { type: 'string', const: 'no-cache' },
};

function basicCredentials(
  header: string | undefined,
): { id: string; secret: string } | null | 'malformed' {
  if (!header) return null;
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return header.toLowerCase().startsWith('basic') ? 'malformed' : null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  if (i < 0) return 'malformed';
  // RFC 6749 §2.3.1: both parts are form-urlencoded before base64.
  try {
    return {
      id: decodeURIComponent(decoded.slice(0, i).replace(/\+/g, ' ')),
      secret: decodeURIComponent(decoded.slice(i + 1).replace(/\+/g, ' ')),
    };
  } catch {
    return 'malformed';
  }
}

/** POST /v1/oauth2/token/ — the client-credentials grant of RFC 6749 §4.4. */
export async function tokenRoute(
  app: FastifyInstance,
  deps: { clients: ClientStore; tokens: AccessTokens; limits: TokenRateLimits },
): Promise<void> {
  await app.register(async (scope) => {
    // Any other body type reaches the handler as an unparsed string, so the caller gets RFC 6749's
    // 400 invalid_request (below) rather than the API's 415, which would tell them to send JSON.
    // JSON too: the API's JSON parser would refuse an empty or broken JSON body with its own error
    // shape, which is not the one this route documents (found by the fuzz suite: a 500).
    scope.removeContentTypeParser(['application/json']);
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_req, _body, done) =>
      done(null, undefined),
    );
    registerTokenRoute(scope, deps);
  });
}

function registerTokenRoute(
  app: FastifyInstance,
  deps: { clients: ClientStore; tokens: AccessTokens; limits: TokenRateLimits },
): void {
  app.post<{ Body: Record<string, string | undefined> }>(
    '/v1/oauth2/token/',
    {
      schema: {
        operationId: 'createToken',
        summary: 'Mint a client-credentials access token',
        description:
          'Form-encoded body (any other type is a 400 invalid_request). Client authentication ' +
          'by HTTP Basic (`Authorization: Basic base64(client_id:client_secret)`) or by the ' +
          'client_id and client_secret form fields. ' +
          ('Rate-limited per address (ENS_TOKEN_RATE_LIMIT per minute), failed attempts counted ' +
            'before credentials are checked.'),
        tags: ['auth'],
        // No token is needed to get one: the client id and secret are the credentials.
        security: [],
        body: { content: { 'application/x-www-form-urlencoded': { schema: TokenForm } } },
        response: {
          200: success(TokenResponse, 'A bearer token for /v2/', NO_STORE),
          400: oauthResponse(
            'invalid_request (not form-encoded, no grant_type, or two ways of authenticating) ' +
              'or unsupported_grant_type',
          ),
          401: oauthResponse(
            'invalid_client: unknown client, wrong secret, disabled client, or malformed HTTP ' +
              'Basic credentials',
            {
              'WWW-Authenticate': { type: 'string', const: 'Basic realm="ens"' },
            },
          ),
          ...errorResponses([413, 429, 503, ...ANY_PATH_ERRORS], {
            413: 'The request body is over ENS_MAX_BODY_BYTES (ENS_ERR_PAYLOAD_TOO_LARGE)',
            429:
              'Too many token requests, or too many failed ones, from this address ' +
              '(ENS_ERR_RATE_LIMITED)',
          }),
        },
      },
      // The body schema is the document's. The handler answers each RFC 6749 error itself
      // (invalid_request, unsupported_grant_type, invalid_client), which a schema failure would
      // turn into ENS_ERR_VALIDATION.
      validatorCompiler: () => (value) => ({ value }),
    },
    async (req, reply) => {
      const ct = (req.headers['content-type'] ?? '').toLowerCase();
      if (!ct.startsWith('application/x-www-form-urlencoded')) {
        throw Errors.oauthInvalidRequest(
          'Send the token request form-encoded (application/x-www-form-urlencoded).',
        );
      }
      const form = (req.body ?? {}) as Record<string, unknown>;
      const field = (k: string): string | undefined =>
        typeof form[k] === 'string' ? (form[k] as string) : undefined;
      const basic = basicCredentials(req.headers.authorization);
      if (basic === 'malformed') throw Errors.oauthInvalidClient();
      if (
        basic &&
        (field('client_id') !== undefined || field('client_secret') !== undefined) &&
        field('client_id') !== basic.id
      ) {
        throw Errors.oauthInvalidRequest(
          'Authenticate with either HTTP Basic or the client_id/client_secret fields, not both.',
        );
      }
      const id = basic?.id ?? field('client_id');
      const secret = basic?.secret ?? field('client_secret');
      await deps.limits.admit(req.ip, id);
      const grant = field('grant_type');
      if (!grant)
        throw Errors.oauthInvalidRequest('grant_type is required; use client_credentials.');
      if (grant !== CLIENT_CREDENTIALS) throw Errors.oauthUnsupportedGrant(grant);
      if (!id || !secret) {
        await deps.limits.failed(req.ip, id);
        throw Errors.oauthInvalidClient();
      }
      const client = await deps.clients.get(id);
      // Verify even for an unknown client so timing does not reveal which ids exist.
      const ok = await verifySecret(
        secret,
        client?.secretHash ??
          'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
      );
      if (!client || !ok || client.disabled) {
        await deps.limits.failed(req.ip, id);
        throw Errors.oauthInvalidClient();
      }
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      return {
        access_token: deps.tokens.mint(client.id),
        token_type: 'Bearer' as const,
        expires_in: deps.tokens.ttlSeconds,
        scope: 'messages deliveries tenants',
      };
    },
  );
}
