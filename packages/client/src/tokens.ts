import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

export interface ClientCredentials {
  /** The ENS base URL, e.g. http://127.0.0.1:8080 */
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  /** Refresh this many seconds before the token expires (at most half its lifetime). Default 60. */
  refreshBeforeSeconds?: number;
  fetch?: typeof globalThis.fetch;
}

/** The token endpoint refused: its RFC 6749 error (or ENS code), status and detail. */
export class TokenError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(`token request failed: ${status} ${code}: ${detail}`);
    this.name = 'TokenError';
  }
}

/**
 * Client-credentials tokens from POST /v1/oauth2/token/, kept until shortly before they expire.
 * Concurrent callers share one token request.
 */
export class TokenSource {
  readonly #opts: ClientCredentials;
  readonly #http;
  #current: { token: string; refreshAtMs: number } | undefined;
  #pending: Promise<string> | undefined;
  /** How many tokens this source has minted: for logs and tests. */
  minted = 0;

  constructor(opts: ClientCredentials) {
    this.#opts = opts;
    this.#http = createClient<paths>({
      baseUrl: opts.baseUrl,
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
    });
  }

  /** A token that is valid for a while yet: the cached one, or a fresh one. */
  async token(): Promise<string> {
    if (this.#current && Date.now() < this.#current.refreshAtMs) return this.#current.token;
    this.#pending ??= this.#mint().finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  /** Forgets the cached token (ENS refused it), so the next call mints another. */
  invalidate(token: string): void {
    if (this.#current?.token === token) this.#current = undefined;
  }

  async #mint(): Promise<string> {
    const { data, error, response } = await this.#http.POST('/v1/oauth2/token/', {
      body: {
        grant_type: 'client_credentials',
        client_id: this.#opts.clientId,
        client_secret: this.#opts.clientSecret,
      },
      bodySerializer: (body) => new URLSearchParams(body as Record<string, string>),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    if (!data) {
      const e = (error ?? {}) as { code?: string; error?: string; detail?: string };
      throw new TokenError(
        response.status,
        e.error ?? e.code ?? 'unknown',
        e.detail ?? response.statusText,
      );
    }
    const lifetime = data.expires_in;
    const early = Math.min(this.#opts.refreshBeforeSeconds ?? 60, lifetime / 2);
    this.#current = {
      token: data.access_token,
      refreshAtMs: Date.now() + (lifetime - early) * 1000,
    };
    this.minted++;
    return data.access_token;
  }
}
