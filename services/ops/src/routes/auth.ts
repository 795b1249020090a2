import type { FastifyInstance } from 'fastify';
import { type OidcSignIn, SignInFailed, type LoginState } from '../oidc.ts';
import {
  LOGIN_COOKIE,
  SESSION_COOKIE,
  auth,
  cookieOptions,
  sendPage,
  type ConsoleDeps,
} from '../request-context.ts';
import { staffLabel } from '../staff/staff-store.ts';
import { superuserSources } from '../staff/superuser.ts';
import { html } from '../views/html.ts';
import { plainPage } from '../views/layout.ts';

/** How long a sign-in may take at the provider before the browser's login state expires. */
const LOGIN_TTL_SECONDS = 600;

/**
 * Where to go after sign-in: a path of the console only, so /ops/login cannot be used to send
 * someone elsewhere (no scheme, no host, no `//` or backslash that a browser reads as a host).
 */
export function safeReturnTo(v: unknown): string {
  if (typeof v !== 'string') return '/ops/';
  if (!/^\/ops(\/|\?|$)/.test(v)) return '/ops/';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a path with one is refused
  if (/[\\\s\x00-\x1f]/.test(v) || v.startsWith('//') || v.includes('/../') || v.includes('/./'))
    return '/ops/';
  return v;
}

function parseLogin(v: string): LoginState | null {
  try {
    const o = JSON.parse(Buffer.from(v, 'base64url').toString('utf8')) as Partial<LoginState>;
    if (
      typeof o.state !== 'string' ||
      typeof o.nonce !== 'string' ||
      typeof o.verifier !== 'string' ||
      typeof o.returnTo !== 'string'
    )
      return null;
    return {
      state: o.state,
      nonce: o.nonce,
      verifier: o.verifier,
      returnTo: safeReturnTo(o.returnTo),
    };
  } catch {
    return null;
  }
}

const signInAgain = html`<p><a class="button" href="/ops/login">Sign in again</a></p>`;

export function authRoutes(app: FastifyInstance, deps: ConsoleDeps, oidc: OidcSignIn): void {
  const { rt } = deps;

  app.get<{ Querystring: { return_to?: string } }>(
    '/login',
    { config: { opsPublic: true } },
    async (req, reply) => {
      const returnTo = safeReturnTo(req.query.return_to);
      let started: Awaited<ReturnType<typeof oidc.start>>;
      try {
        started = await oidc.start(returnTo);
      } catch (err) {
        req.log.error(
          { err, issuer: deps.ops.issuer },
          'console sign-in: the identity provider could not be reached',
        );
        return sendPage(
          reply,
          502,
          plainPage(
            'Sign-in unavailable',
            html`<h1>Sign-in is unavailable</h1>
<p>The identity provider at <code>${deps.ops.issuer}</code> could not be reached, so you cannot sign in right now. Try again in a moment; if it persists, check <code>ENS_OPS_ISSUER</code> and the ENS logs.</p>
<p><a class="button" href="/ops/login">Try again</a></p>`,
          ),
        );
      }
      reply.setCookie(
        LOGIN_COOKIE,
        Buffer.from(JSON.stringify(started.login)).toString('base64url'),
        cookieOptions(deps, LOGIN_TTL_SECONDS),
      );
      return reply.header('cache-control', 'no-store').redirect(started.url.href, 302);
    },
  );

  app.get('/callback', { config: { opsPublic: true } }, async (req, reply) => {
    const raw = req.cookies[LOGIN_COOKIE];
    const un = raw ? reply.unsignCookie(raw) : null;
    reply.clearCookie(LOGIN_COOKIE, cookieOptions(deps));
    const q = req.query as Record<string, unknown>;
    if (typeof q.error === 'string') {
      const why =
        typeof q.error_description === 'string' ? `${q.error}: ${q.error_description}` : q.error;
      return sendPage(
        reply,
        401,
        plainPage(
          'Sign-in refused',
          html`<h1>The identity provider did not sign you in</h1><p>It answered <code>${why}</code>.</p>${signInAgain}`,
        ),
      );
    }
    const login = un?.valid && un.value ? parseLogin(un.value) : null;
    if (!login) {
      return sendPage(
        reply,
        400,
        plainPage(
          'Sign-in expired',
          html`<h1>This sign-in could not be completed</h1>
<p>It was started more than ${LOGIN_TTL_SECONDS / 60} minutes ago, or in another browser. Nothing is wrong with your account; start again.</p>${signInAgain}`,
        ),
      );
    }
    const search = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '';
    let signIn: Awaited<ReturnType<typeof oidc.finish>>;
    try {
      signIn = await oidc.finish(new URL(`${rt.config.publicUrl}/ops/callback${search}`), login);
    } catch (err) {
      if (err instanceof SignInFailed) {
        req.log.warn({ err }, 'console sign-in failed');
        return sendPage(
          reply,
          401,
          plainPage(
            'Sign-in failed',
            html`<h1>Sign-in failed</h1><p>${err.message}</p>${signInAgain}`,
          ),
        );
      }
      req.log.error({ err }, 'console sign-in: the identity provider could not be reached');
      return sendPage(
        reply,
        502,
        plainPage(
          'Sign-in unavailable',
          html`<h1>Sign-in is unavailable</h1><p>The identity provider could not be reached to finish the sign-in.</p>${signInAgain}`,
        ),
      );
    }
    const { staff, grantApplied } = await deps.staff.recordSignIn(signIn);
    // A session that was already in this browser ends: each sign-in gets a new token.
    const old = req.cookies[SESSION_COOKIE]
      ? reply.unsignCookie(req.cookies[SESSION_COOKIE])
      : null;
    if (old?.valid && old.value) await deps.sessions.end(old.value);
    const { token } = await deps.sessions.create(staff.id);
    const sources = superuserSources(staff, deps.ops);
    await deps.audit.write({
      actor: staffLabel(staff),
      staffId: staff.id,
      action: 'staff.sign_in',
      target: staffLabel(staff),
      detail: {
        issuer: staff.issuer,
        subject: staff.subject,
        superuser: sources.length > 0,
        rights_from: sources,
        grant_applied: grantApplied,
      },
    });
    reply.setCookie(
      SESSION_COOKIE,
      token,
      cookieOptions(deps, Math.floor(deps.ops.sessionTtlMs / 1000)),
    );
    return reply.header('cache-control', 'no-store').redirect(login.returnTo, 302);
  });

  app.post(
    '/logout',
    { config: { opsAnyStaff: true }, preHandler: app.csrfProtection },
    async (req, reply) => {
      const a = auth(req);
      await deps.sessions.end(a.token);
      await deps.audit.write({
        actor: staffLabel(a.staff),
        staffId: a.staff.id,
        action: 'staff.sign_out',
        target: staffLabel(a.staff),
      });
      reply.clearCookie(SESSION_COOKIE, cookieOptions(deps));
      return reply.redirect('/ops/signed-out', 302);
    },
  );

  app.get('/signed-out', { config: { opsPublic: true } }, async (_req, reply) => {
    return sendPage(
      reply,
      200,
      plainPage(
        'Signed out',
        html`<h1>You are signed out</h1><p>Your console session has ended.</p><p><a class="button" href="/ops/login">Sign in again</a></p>`,
      ),
    );
  });
}
