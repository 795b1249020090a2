import type { FastifyRequest } from 'fastify';
import { Errors, type ClientRow } from '@ens/core';
import type { ClientDirectory } from '@ens/core/internal';
import { CLIENT_CREDENTIALS, type AccessTokens } from './access-token.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The OAuth client that owns the request's token; set on every /v2/ route. */
    client: ClientRow;
  }
}

/**
 * Authenticates a /v2/ request: a valid, unexpired client-credentials token of an enabled client.
 * Every failure gets the same answer, so a caller learns nothing about which check failed.
 */
export function clientAuthenticator(tokens: AccessTokens, directory: ClientDirectory) {
  return async (req: FastifyRequest): Promise<void> => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const claims = m ? tokens.verify(m[1]!) : null;
    if (!claims || claims.gty !== CLIENT_CREDENTIALS) throw Errors.authRequired();
    const client = await directory.get(claims.sub);
    if (!client || client.disabled) throw Errors.authRequired();
    req.client = client;
  };
}
