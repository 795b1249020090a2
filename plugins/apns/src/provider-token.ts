import { createPrivateKey, type KeyObject } from 'node:crypto';
import { createSigner } from 'fast-jwt';

/**
 * Apple's rules for the provider authentication token: APNs rejects one older than an hour
 * (ExpiredProviderToken) and answers 429 TooManyProviderTokenUpdates when a new one comes less than
 * 20 minutes after the last. So one token is shared by every request, minted again at 50 minutes,
 * and never sooner than 20 minutes unless nothing has been minted yet.
 */
export const TOKEN_REUSE_MS = 50 * 60_000;
export const TOKEN_MIN_REFRESH_MS = 20 * 60_000;

export interface ProviderToken {
  jwt: string;
  /** When it was minted, in ms of the token clock (iat is this in whole seconds). */
  issuedAt: number;
}

/** Refuses a key APNs could never accept, at start-up rather than on the first send. */
export function loadSigningKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (e) {
    throw new Error(
      `apns config /privateKey: not a readable PEM private key (${(e as Error).message})`,
    );
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error(
      'apns config /privateKey: APNs keys are P-256 (ES256) keys; paste the whole ' +
        'AuthKey_<keyId>.p8 file',
    );
  }
  return key;
}

export class ProviderTokenCache {
  private token: ProviderToken | undefined;
  private readonly sign: (claims: { iss: string; iat: number }) => string;

  constructor(
    private readonly teamId: string,
    keyId: string,
    privateKeyPem: string,
    private readonly now: () => number,
  ) {
    // The header is {alg: ES256, typ: JWT, kid}; fast-jwt keeps the iat it is given (from our
    // clock, not its own) and adds no other claim.
    this.sign = createSigner({ key: privateKeyPem, algorithm: 'ES256', kid: keyId });
  }

  current(): ProviderToken {
    if (!this.token || this.now() - this.token.issuedAt >= TOKEN_REUSE_MS) this.token = this.mint();
    return this.token;
  }

  /**
   * APNs called `stale` expired. Returns the token to retry with, or undefined when minting one now
   * would break the 20-minute rule: a token younger than that "expired" means the clocks disagree,
   * and a new one with the same clock would fare no better.
   */
  renewAfterExpired(stale: ProviderToken): ProviderToken | undefined {
    const cur = this.current();
    if (cur.jwt !== stale.jwt) return cur; // a concurrent send already renewed it
    if (this.now() - cur.issuedAt < TOKEN_MIN_REFRESH_MS) return undefined;
    this.token = this.mint();
    return this.token;
  }

  private mint(): ProviderToken {
    const issuedAt = this.now();
    return { jwt: this.sign({ iss: this.teamId, iat: Math.floor(issuedAt / 1000) }), issuedAt };
  }
}
