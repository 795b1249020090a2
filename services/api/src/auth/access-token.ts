import { createSigner, createVerifier } from 'fast-jwt';

export const CLIENT_CREDENTIALS = 'client_credentials';

const MAX_VERIFIED = 10_000;

export interface AccessClaims {
  sub: string;
  /** The grant the token was minted with; /v2/ accepts only client_credentials. */
  gty: string;
  scope: string;
}

/**
 * Mints and verifies ENS access tokens: HS256 JWTs keyed with a key derived from the master key.
 */
export class AccessTokens {
  readonly #sign: (payload: Record<string, unknown>) => string;
  readonly #verify: (token: string) => AccessClaims & { exp?: number };
  /**
   * Tokens already verified, by their exact text, until they expire. fast-jwt's own cache keys its
   * entries by a SHA-512 of the token, which cost more per request than this whole check.
   */
  readonly #verified = new Map<string, { claims: AccessClaims; untilMs: number }>();

  constructor(
    key: Buffer,
    readonly ttlSeconds: number,
  ) {
    this.#sign = createSigner({
      key,
      algorithm: 'HS256',
      iss: 'ens',
      aud: 'ens-api',
      expiresIn: ttlSeconds * 1000,
    });
    // allowedIss and allowedAud check a claim only when it is there: requiredClaims makes a token
    // without them (or without an expiry) fail like a forgery, even when the signature holds.
    this.#verify = createVerifier({
      key,
      algorithms: ['HS256'],
      allowedIss: 'ens',
      allowedAud: 'ens-api',
      requiredClaims: ['exp', 'iss', 'aud', 'sub'],
    }) as (t: string) => AccessClaims & { exp?: number };
  }

  mint(clientId: string, grant: string = CLIENT_CREDENTIALS): string {
    return this.#sign({ sub: clientId, gty: grant, scope: 'messages deliveries tenants' });
  }

  /** Returns the claims, or null for a malformed, forged or expired token. */
  verify(token: string): AccessClaims | null {
    const hit = this.#verified.get(token);
    if (hit && Date.now() < hit.untilMs) return hit.claims;
    let c: AccessClaims & { exp?: number };
    try {
      c = this.#verify(token);
    } catch {
      if (hit) this.#verified.delete(token);
      return null;
    }
    if (typeof c.sub !== 'string' || typeof c.gty !== 'string') return null;
    if (typeof c.exp === 'number') {
      if (this.#verified.size >= MAX_VERIFIED) this.#verified.clear();
      this.#verified.set(token, { claims: c, untilMs: c.exp * 1000 });
    }
    return c;
  }
}
