import { createSigner, createVerifier } from 'fast-jwt';

export const CLIENT_CREDENTIALS = 'client_credentials';

export interface AccessClaims {
  sub: string;
  /** The grant the token was minted with; /v2/ accepts only client_credentials. */
  gty: string;
  scope: string;
}

/** Mints and verifies ENS access tokens: HS256 JWTs keyed with a key derived from the master key. */
export class AccessTokens {
  readonly #sign: (payload: Record<string, unknown>) => string;
  readonly #verify: (token: string) => AccessClaims;

  constructor(key: Buffer, readonly ttlSeconds: number) {
    this.#sign = createSigner({ key, algorithm: 'HS256', iss: 'ens', aud: 'ens-api', expiresIn: ttlSeconds * 1000 });
    this.#verify = createVerifier({ key, algorithms: ['HS256'], allowedIss: 'ens', allowedAud: 'ens-api', cache: 10_000 }) as (t: string) => AccessClaims;
  }

  mint(clientId: string, grant: string = CLIENT_CREDENTIALS): string {
    return this.#sign({ sub: clientId, gty: grant, scope: 'messages deliveries tenants' });
  }

  /** Returns the claims, or null for a malformed, forged or expired token. */
  verify(token: string): AccessClaims | null {
    try {
      const c = this.#verify(token);
      return typeof c.sub === 'string' && typeof c.gty === 'string' ? c : null;
    } catch {
      return null;
    }
  }
}
