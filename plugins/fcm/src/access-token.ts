import { createSigner } from 'fast-jwt';
import { transientError } from '@ens/plugin-sdk';
import type { Credentials } from './service-account.ts';

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** Google refuses assertions that live longer than an hour. */
const ASSERTION_LIFETIME_S = 3600;
/**
 * A token is given up this long before Google says it expires, so that a send started with it
 * does not reach FCM after it has lapsed (clock skew, a slow request).
 */
export const REFRESH_MARGIN_MS = 60_000;

interface TokenAnswer {
  access_token?: unknown;
  expires_in?: unknown;
  error?: unknown;
  error_description?: unknown;
}

/**
 * The OAuth 2.0 service-account flow ("two-legged OAuth"): a JWT signed with the account's key is
 * exchanged at token_uri for an access token, which is kept until shortly before it expires. At
 * most one exchange is under way at a time; concurrent sends wait for it.
 */
export class AccessTokenSource {
  readonly #creds: Credentials;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #sign: (payload: Record<string, unknown>) => string;
  #cached: { token: string; freshUntil: number } | undefined;
  #inFlight: Promise<string> | undefined;

  constructor(creds: Credentials, opts: { timeoutMs: number; now?: () => number }) {
    this.#creds = creds;
    this.#timeoutMs = opts.timeoutMs;
    this.#now = opts.now ?? Date.now;
    // kid lets Google pick the public key of this key id among the account's keys.
    this.#sign = createSigner({
      algorithm: 'RS256',
      key: creds.privateKey,
      kid: creds.privateKeyId,
    });
  }

  /** A usable access token: the cached one, or a new one from a (shared) exchange. */
  get(): Promise<string> {
    const c = this.#cached;
    if (c && this.#now() < c.freshUntil) return Promise.resolve(c.token);
    this.#inFlight ??= this.#exchange().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  /** Drops the cached token and exchanges a new one (checkCredentials). */
  refresh(): Promise<string> {
    this.#cached = undefined;
    return this.get();
  }

  /**
   * FCM refused `token`: forget it, unless a newer one has replaced it meanwhile (another send may
   * already have refreshed).
   */
  invalidate(token: string): void {
    if (this.#cached?.token === token) this.#cached = undefined;
  }

  async #exchange(): Promise<string> {
    const { clientEmail, tokenUri } = this.#creds;
    const started = this.#now();
    const iat = Math.floor(started / 1000);
    const assertion = this.#sign({
      iss: clientEmail,
      scope: FCM_SCOPE,
      aud: tokenUri,
      iat,
      exp: iat + ASSERTION_LIFETIME_S,
    });
    let res: Response;
    try {
      res = await fetch(tokenUri, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (e) {
      throw transientError(
        `fcm: OAuth token exchange at ${tokenUri} failed: ${networkReason(e, this.#timeoutMs)}`,
        e,
      );
    }
    const text = await res.text().catch(() => '');
    let answer: TokenAnswer = {};
    try {
      answer = JSON.parse(text) as TokenAnswer;
    } catch {
      // not JSON (a proxy's error page): the status and text below say what happened
    }
    if (!res.ok) {
      // A refused assertion is a configuration fault (revoked key, wrong account, clock skew):
      // transient, so it counts toward failover while the operator fixes it.
      const reason =
        typeof answer.error === 'string'
          ? `${answer.error}${typeof answer.error_description === 'string' ? `: ${answer.error_description}` : ''}`
          : snippet(text);
      throw transientError(
        `fcm: OAuth token exchange for ${clientEmail} refused (HTTP ${res.status} ${reason})`,
      );
    }
    if (typeof answer.access_token !== 'string' || answer.access_token === '') {
      throw transientError(
        `fcm: OAuth token endpoint ${tokenUri} answered ${res.status} without an access_token`,
      );
    }
    const lifetimeS =
      typeof answer.expires_in === 'number' && answer.expires_in > 0
        ? answer.expires_in
        : ASSERTION_LIFETIME_S;
    this.#cached = {
      token: answer.access_token,
      freshUntil: started + lifetimeS * 1000 - REFRESH_MARGIN_MS,
    };
    return answer.access_token;
  }
}

export function networkReason(e: unknown, timeoutMs: number): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  const cause = err?.cause?.code ?? err?.cause?.message;
  return cause ? `${err.message ?? String(e)} (${cause})` : (err?.message ?? String(e));
}

export function snippet(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t === '' ? '(empty body)' : t.length > 200 ? `${t.slice(0, 200)}…` : t;
}
