import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Provider, type OidcContext } from 'oidc-provider';
import type { Page } from 'playwright-core';
import type { Teardown } from './service.ts';

/**
 * A real OpenID Provider (the `oidc-provider` package, the certified implementation many
 * production IdPs are built on) for the console's sign-in tests, on 127.0.0.1 and a free port.
 *
 * Signing in: the library's devInteractions login form (GET /interaction/:uid) accepts any login
 * name and password and makes the login name the account id. It is the library's own page and
 * flow (interaction cookie, resume, grant), so driving it in the browser exercises a true redirect
 * round trip; writing our own login page would only re-implement it. We type the account's
 * `sub` as the login name. The consent prompt that would follow is skipped by granting the
 * console's scopes on first use (the library's documented `loadExistingGrant` recipe for
 * first-party clients), as an organization's IdP does for its own applications.
 *
 * Choices that make the IdP strict where the console must be correct:
 * - PKCE is required for the client. (The library by default requires it only for public
 *   clients, so without this a console that skipped PKCE would still pass.) Only S256 is accepted.
 * - The client authenticates at the token endpoint with client_secret_basic, the registration
 *   default that RFC 6749 §2.3.1 requires every server to support.
 * - Claims come in both the ID token and userinfo (conformIdTokenClaims: false), with `groups`
 *   under the `profile` scope (and also its own `groups` scope).
 * - Account subjects are opaque ids, not emails, so a console that shows `sub` where it should
 *   show the email is caught.
 */

export interface TestAccount {
  sub: string;
  email: string;
  name: string;
  groups: string[];
}

export const DEFAULT_ACCOUNTS: readonly TestAccount[] = [
  {
    sub: 'u-7f3a-ada',
    email: 'ada@example.com',
    name: 'Ada Lovelace',
    groups: ['ens-superusers', 'engineering'],
  },
  { sub: 'u-91c2-bob', email: 'bob@example.com', name: 'Bob Baker', groups: [] },
  { sub: 'u-5d0e-carol', email: 'carol@example.com', name: 'Carol Chen', groups: ['support'] },
];

export interface TestIdp {
  /** The issuer identifier (no trailing slash), for ENS_OPS_ISSUER. */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** ENS_OPS_ISSUER, ENS_OPS_CLIENT_ID and ENS_OPS_CLIENT_SECRET for startTestService. */
  env: Record<string, string>;
  accounts: readonly TestAccount[];
  /** Every authorization request the IdP received, as full URLs. */
  authorizationRequests: URL[];
  /** How many token requests the IdP answered 200 (codes redeemed). */
  tokensIssued(): number;
  /**
   * Signs in as the account with this email on the IdP's login page: the page must be on it, or
   * on its way there (e.g. just after page.goto of a console URL). Resolves once the browser has
   * left the IdP again (back at the console's redirect URI and wherever that redirects).
   */
  signIn(page: Page, email: string): Promise<void>;
}

export async function startTestIdp(
  t: Teardown,
  opts: {
    ensPublicUrl: string;
    accounts?: readonly TestAccount[];
    clientId?: string;
    clientSecret?: string;
  },
): Promise<TestIdp> {
  const accounts = opts.accounts ?? DEFAULT_ACCOUNTS;
  const clientId = opts.clientId ?? 'ens-console';
  const clientSecret = opts.clientSecret ?? randomBytes(24).toString('base64url');

  // Listen first: the issuer identifier must name the port before the provider is built.
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) =>
    res.writeHead(503).end();
  const authorizationRequests: URL[] = [];
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url !== undefined && /^\/auth(\?|$)/.test(req.url)) {
      authorizationRequests.push(new URL(req.url, issuer));
    }
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    format: 'jwk',
  });
  const bySub = new Map(accounts.map((a) => [a.sub, a]));

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [`${opts.ensPublicUrl}/ops/callback`],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: [{ ...signingKey, kid: 'test-idp-rs256', use: 'sig', alg: 'RS256' }] },
    cookies: {
      keys: [randomBytes(32).toString('base64url')],
      // ENS and this IdP share the host 127.0.0.1 and cookies ignore ports: distinct names keep
      // the two sets of cookies from overwriting each other.
      names: {
        session: 'idp_session',
        interaction: 'idp_interaction',
        resume: 'idp_interaction_resume',
      },
    },
    pkce: { required: () => true },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'groups'],
      groups: ['groups'],
    },
    conformIdTokenClaims: false,
    // Explicit lifetimes (seconds); the library prints a notice on stdout for each default it uses.
    ttl: {
      AccessToken: 600,
      AuthorizationCode: 60,
      Grant: 3600,
      IdToken: 600,
      Interaction: 600,
      Session: 3600,
    },
    features: { devInteractions: { enabled: true } },
    async findAccount(_ctx: unknown, sub: string) {
      const account = bySub.get(sub);
      if (!account) return undefined;
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            email: account.email,
            email_verified: true,
            name: account.name,
            groups: account.groups,
          };
        },
      };
    },
    async loadExistingGrant(ctx: OidcContext) {
      const { oidc } = ctx;
      const clientId = oidc.client!.clientId;
      const grantId = oidc.result?.consent?.grantId ?? oidc.session?.grantIdFor(clientId);
      if (grantId) return oidc.provider.Grant.find(grantId);
      const grant = new oidc.provider.Grant({ accountId: oidc.session!.accountId!, clientId });
      grant.addOIDCScope('openid email profile groups');
      grant.addOIDCClaims(['email', 'email_verified', 'name', 'groups']);
      await grant.save();
      return grant;
    },
  });
  let issued = 0;
  provider.on('grant.success', () => {
    issued += 1;
  });
  handler = provider.callback();

  const accountByEmail = (email: string): TestAccount => {
    const account = accounts.find((a) => a.email === email);
    if (!account) throw new Error(`the test IdP has no account ${email}`);
    return account;
  };

  return {
    issuer,
    clientId,
    clientSecret,
    env: {
      ENS_OPS_ISSUER: issuer,
      ENS_OPS_CLIENT_ID: clientId,
      ENS_OPS_CLIENT_SECRET: clientSecret,
    },
    accounts,
    authorizationRequests,
    tokensIssued: () => issued,
    async signIn(page, email) {
      const account = accountByEmail(email);
      const atIdp = (u: URL) => u.origin === issuer;
      await page
        .waitForURL((u) => atIdp(u) && u.pathname.startsWith('/interaction/'), { timeout: 10_000 })
        .catch(async () => {
          const body =
            (await page
              .locator('body')
              .textContent()
              .catch(() => '')) ?? '';
          throw new Error(
            `signIn(${email}): the browser never reached the IdP's login page; it is at ${page.url()} showing: ${body.replace(/\s+/g, ' ').trim().slice(0, 300)}`,
          );
        });
      await page.locator('input[name="login"]').fill(account.sub);
      await page.locator('input[name="password"]').fill('any password will do');
      await Promise.all([
        page.waitForURL((u) => !atIdp(u), { timeout: 10_000, waitUntil: 'load' }),
        page.locator('button[type="submit"]').click(),
      ]);
    },
  };
}
