import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import type { OpsConfig, Runtime } from '@ens/core';
import { deriveKey, findHostileInput, resolveMasterKey } from '@ens/core/internal';
import { OidcSignIn } from './oidc.ts';
import { CSRF_COOKIE, SESSION_COOKIE, sendPage, type ConsoleDeps } from './request-context.ts';
import { SessionStore } from './session-store.ts';
import { AuditLog } from './staff/audit-log.ts';
import { StaffStore } from './staff/staff-store.ts';
import { isSuperuser } from './staff/superuser.ts';
import { html } from './views/html.ts';
import { noticePage, plainPage } from './views/layout.ts';
import { authRoutes } from './routes/auth.ts';
import { dashboardRoutes } from './routes/dashboard.ts';
import { deliveryRoutes } from './routes/deliveries.ts';
import { clientRoutes } from './routes/clients.ts';
import { suppressionRoutes } from './routes/suppressions.ts';
import { deadLetterRoutes } from './routes/dead-letters.ts';
import { alertRoutes } from './routes/alerts.ts';
import { auditRoutes } from './routes/audit.ts';

/**
 * application/x-www-form-urlencoded, for when the host server has no form parser (the API's has
 * one).
 */
function addFormParser(app: FastifyInstance): void {
  if (app.hasContentTypeParser('application/x-www-form-urlencoded')) return;
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 64 * 1024 },
    (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    },
  );
}

/**
 * The console behind its sign-in, registered in opsConsole's scope (prefix /ops, its headers and
 * its hidden routes already in place) where ENS_OPS_ISSUER is set.
 */
export async function signedInConsole(
  app: FastifyInstance,
  rt: Runtime,
  ops: OpsConfig,
  serveAsset: (
    req: FastifyRequest<{ Params: { name: string } }>,
    reply: FastifyReply,
  ) => Promise<FastifyReply>,
): Promise<void> {
  const oidc = new OidcSignIn(ops, `${rt.config.publicUrl}/ops/callback`);
  const masterKey = await resolveMasterKey(rt.config.masterKey, rt.config.dataDir);
  const secure = rt.config.publicUrl.startsWith('https:');
  const deps: ConsoleDeps = {
    rt,
    ops,
    staff: new StaffStore(rt.db),
    audit: new AuditLog(rt.db),
    sessions: new SessionStore(rt.db, ops.sessionTtlMs),
    secure,
  };

  addFormParser(app);
  await app.register(cookie, { secret: deriveKey(masterKey, 'ops-cookie').toString('base64') });
  await app.register(csrf, {
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: '/ops', httpOnly: true, sameSite: 'lax', secure, signed: true },
    // The token is bound to the session, so a token from another session (or a planted csrf
    // cookie) does not pass.
    getUserInfo: (req: FastifyRequest) => req.opsAuth?.sessionId ?? '',
    csrfOpts: { hmacKey: deriveKey(masterKey, 'ops-csrf') },
    logLevel: 'info',
  });
  app.decorateRequest('opsAuth', null);

  // Every route but the public ones: a live session, and superuser rights unless the route
  // says any signed-in person may use it (sign-out).
  app.addHook('onRequest', async (req, reply) => {
    const cfg = req.routeOptions.config;
    if (cfg?.opsPublic) return;
    const isApi = req.url.startsWith('/ops/api/') || req.url === '/ops/api';
    const raw = req.cookies[SESSION_COOKIE];
    const un = raw ? reply.unsignCookie(raw) : null;
    const token = un?.valid ? un.value : null;
    const found = token ? await deps.sessions.lookup(token) : null;
    if (!found || !token) {
      if ((req.method === 'GET' || req.method === 'HEAD') && !isApi) {
        return reply
          .header('cache-control', 'no-store')
          .redirect(`/ops/login?return_to=${encodeURIComponent(req.url)}`, 302);
      }
      if (isApi)
        return reply
          .code(401)
          .header('cache-control', 'no-store')
          .send({ detail: 'Sign in to the console at /ops/login.' });
      return sendPage(
        reply,
        401,
        plainPage(
          'Signed out',
          html`<h1>Your session has ended</h1><p>Nothing was changed. <a href="/ops/login">Sign in again</a> and repeat the action.</p>`,
        ),
      );
    }
    const superuser = isSuperuser(found.staff, ops);
    req.opsAuth = { token, sessionId: found.sessionId, staff: found.staff, superuser };
    if (superuser || cfg?.opsAnyStaff) return;
    if (isApi)
      return reply
        .code(403)
        .header('cache-control', 'no-store')
        .send({ detail: 'Only ENS superusers may use the console.' });
    const who = found.staff.email ?? found.staff.subject;
    return sendPage(
      reply,
      403,
      noticePage(who, ops.contact, reply.generateCsrf({ userInfo: found.sessionId })),
    );
  });

  // A NUL in a filter or a form field reached PostgreSQL, whose text cannot hold one (a 500):
  // refused here for every page, with the API's rule for the API's bodies and queries.
  app.addHook('preHandler', async (req, reply) => {
    const bad = findHostileInput(req.query, '/query') ?? findHostileInput(req.body, '/form');
    if (!bad) return;
    const detail = `${bad.path.replace(/^\/(query|form)\//, '')} ${bad.message}.`;
    if (req.url.startsWith('/ops/api/'))
      return reply.code(400).header('cache-control', 'no-store').send({ detail });
    return sendPage(
      reply,
      400,
      plainPage(
        'Bad request',
        html`<h1>The request could not be handled</h1><p>The field ${detail} Nothing was changed.</p><p><a href="/ops/">Back to the dashboard</a></p>`,
      ),
    );
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const status =
      err.statusCode && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    if (status >= 500) req.log.error({ err, url: req.url }, 'console request failed');
    const isApi = req.url.startsWith('/ops/api/');
    if (isApi)
      return reply.code(status).send({
        detail: status >= 500 ? 'The console could not answer; see the ENS logs.' : err.message,
      });
    if (err.code === 'FST_CSRF_INVALID_TOKEN' || err.code === 'FST_CSRF_MISSING_SECRET') {
      return sendPage(
        reply,
        403,
        plainPage(
          'Form expired',
          html`<h1>This form could not be accepted</h1>
<p>It has expired or did not come from this console, so nothing was changed. Go back, reload the page, and try again.</p>
<p><a href="/ops/">Back to the dashboard</a></p>`,
        ),
      );
    }
    const body =
      status >= 500
        ? html`<h1>Something went wrong</h1><p>The console could not complete this request. It has been logged with request id <code>${req.id}</code>.</p><p><a href="/ops/">Back to the dashboard</a></p>`
        : html`<h1>The request could not be handled</h1><p>${err.message}</p><p><a href="/ops/">Back to the dashboard</a></p>`;
    return sendPage(reply, status, plainPage(status >= 500 ? 'Error' : 'Bad request', body));
  });

  app.setNotFoundHandler((req, reply) => {
    if (req.url.startsWith('/ops/api/')) return reply.code(404).send({ detail: 'Not found.' });
    return sendPage(
      reply,
      404,
      plainPage(
        'Not found',
        html`<h1>Page not found</h1><p>There is no console page at <code>${req.url}</code>.</p><p><a href="/ops/">Back to the dashboard</a></p>`,
      ),
    );
  });

  app.get<{ Params: { name: string } }>(
    '/assets/:name',
    { config: { opsPublic: true } },
    serveAsset,
  );

  authRoutes(app, deps, oidc);
  dashboardRoutes(app, deps);
  deliveryRoutes(app, deps);
  clientRoutes(app, deps);
  suppressionRoutes(app, deps);
  deadLetterRoutes(app, deps);
  alertRoutes(app, deps);
  auditRoutes(app, deps);
}
