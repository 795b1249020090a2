import * as client from 'openid-client';
import { ConfigError, EnsError, type OpsConfig } from '@ens/core';
import { groupsFromClaim } from './staff/superuser.ts';
import type { SignIn } from './staff/staff-store.ts';

/**
 * What the browser carries (in a signed, short-lived cookie) between /ops/login and /ops/callback.
 */
export interface LoginState {
  state: string;
  nonce: string;
  verifier: string;
  returnTo: string;
}

function isLoopback(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * An http:// issuer is accepted only on loopback (a test or a laptop provider): anywhere else the
 * tokens and the client secret would cross the network in clear.
 */
export function checkIssuer(issuer: string): URL {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new ConfigError(`ENS_OPS_ISSUER: "${issuer}" is not a URL`);
  }
  if (url.protocol === 'https:') return url;
  if (url.protocol === 'http:' && isLoopback(url.hostname)) return url;
  throw new ConfigError(
    `ENS_OPS_ISSUER: ${issuer} must use https (plain http is allowed only for a provider on this machine's loopback address)`,
  );
}

export class SignInFailed extends EnsError {
  static override readonly code: string = 'ENS_ERR_OPS_SIGN_IN';
}

/**
 * OpenID Connect sign-in through openid-client: authorization code with PKCE (S256), state and
 * nonce. The provider's metadata is discovered once and kept; a failed discovery is not kept, so
 * the next sign-in tries again.
 */
export class OidcSignIn {
  readonly #issuer: URL;
  #config: Promise<client.Configuration> | null = null;

  constructor(
    private readonly ops: OpsConfig,
    readonly redirectUri: string,
  ) {
    this.#issuer = checkIssuer(ops.issuer);
  }

  get insecure(): boolean {
    return this.#issuer.protocol === 'http:';
  }

  configuration(): Promise<client.Configuration> {
    if (!this.#config) {
      this.#config = this.#discover().catch((e: unknown) => {
        this.#config = null;
        throw e;
      });
    }
    return this.#config;
  }

  async #discover(): Promise<client.Configuration> {
    const execute = this.insecure ? [client.allowInsecureRequests] : [];
    const found = await client.discovery(
      this.#issuer,
      this.ops.clientId,
      undefined,
      client.None(),
      { execute, timeout: 10 },
    );
    // client_secret_basic is what the spec makes the default and what most providers register a
    // client with; post only when the provider says it does not take basic.
    const methods = found.serverMetadata().token_endpoint_auth_methods_supported;
    const auth =
      !methods || methods.includes('client_secret_basic')
        ? client.ClientSecretBasic(this.ops.clientSecret)
        : client.ClientSecretPost(this.ops.clientSecret);
    const config = new client.Configuration(
      found.serverMetadata(),
      this.ops.clientId,
      this.ops.clientSecret,
      auth,
    );
    config.timeout = 10;
    for (const f of execute) f(config);
    return config;
  }

  /**
   * The provider's authorization URL for a new sign-in, and the state to keep until the callback.
   */
  async start(returnTo: string): Promise<{ url: URL; login: LoginState }> {
    const config = await this.configuration();
    const verifier = client.randomPKCECodeVerifier();
    const login: LoginState = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier,
      returnTo,
    };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUri,
      scope: this.ops.scopes,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: login.state,
      nonce: login.nonce,
    });
    return { url, login };
  }

  /**
   * Exchanges the code and returns who signed in. Email and groups come from the ID token, or
   * from userinfo when the ID token lacks them (many providers keep groups out of the ID token).
   */
  async finish(currentUrl: URL, login: LoginState): Promise<SignIn> {
    const config = await this.configuration();
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(config, currentUrl, {
        pkceCodeVerifier: login.verifier,
        expectedState: login.state,
        expectedNonce: login.nonce,
        idTokenExpected: true,
      });
    } catch (e) {
      const err = e as { error?: string; error_description?: string; message?: string };
      throw new SignInFailed(
        err.error
          ? `${err.error}${err.error_description ? `: ${err.error_description}` : ''}`
          : (err.message ?? 'the code exchange failed'),
        { cause: e },
      );
    }
    const claims: Record<string, unknown> = { ...(tokens.claims() ?? {}) };
    const sub = claims.sub;
    if (typeof sub !== 'string' || sub === '')
      throw new SignInFailed('the ID token has no subject');
    const groupsClaim = this.ops.groupsClaim;
    if (
      (claims.email === undefined || claims[groupsClaim] === undefined) &&
      config.serverMetadata().userinfo_endpoint
    ) {
      try {
        const info = await client.fetchUserInfo(config, tokens.access_token, sub);
        for (const [k, v] of Object.entries(info)) if (claims[k] === undefined) claims[k] = v;
      } catch {
        // userinfo is only a second source; what the ID token said stands.
      }
    }
    return {
      issuer: config.serverMetadata().issuer,
      subject: sub,
      email: typeof claims.email === 'string' && claims.email !== '' ? claims.email : null,
      name:
        typeof claims.name === 'string'
          ? claims.name
          : typeof claims.preferred_username === 'string'
            ? claims.preferred_username
            : null,
      groups: groupsFromClaim(claims[groupsClaim]),
    };
  }
}
