import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Runtime } from '@ens/core';
import { sendPage } from './request-context.ts';
import { html } from './views/html.ts';
import { plainPage } from './views/layout.ts';

/*
 * The stylesheet and the script are plain files served as they are (no build step). They sit in
 * ../assets from this module, which is the same folder from src/ (source) and dist/ (the bundle).
 */
const ASSETS: Record<string, { type: string; body: Buffer }> = {
  'console.css': {
    type: 'text/css; charset=utf-8',
    body: readFileSync(new URL('../assets/console.css', import.meta.url)),
  },
  'console.js': {
    type: 'text/javascript; charset=utf-8',
    body: readFileSync(new URL('../assets/console.js', import.meta.url)),
  },
};

/** GET /ops/assets/:name — the console's stylesheet and script, configured or not. */
async function serveAsset(
  req: FastifyRequest<{ Params: { name: string } }>,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const a = Object.hasOwn(ASSETS, req.params.name) ? ASSETS[req.params.name] : undefined;
  if (!a) return reply.code(404).type('text/plain').send('not found');
  return reply.type(a.type).header('cache-control', 'public, max-age=300').send(a.body);
}

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    "form-action 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
};

/*
 * Unconfigured is a deployment's choice, not a failure: the pages answer 404 (there is no console
 * here), which the API's request log does not report as an error the way it does every 5xx, and
 * the stylesheet and script are still served so the page that says so is readable.
 */
function notConfigured(_req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendPage(
    reply,
    404,
    plainPage(
      'The console is not configured',
      html`<h1>The console is not configured</h1>
<p>The operations console signs staff in through your organization's identity provider. Set
<code>ENS_OPS_ISSUER</code>, <code>ENS_OPS_CLIENT_ID</code> and <code>ENS_OPS_CLIENT_SECRET</code> and restart ENS; the documentation's console guide (docs/guides/console.md) shows how.</p>`,
    ),
  );
}

/**
 * The operations console, to be registered with prefix /ops outside the /v2 auth scope:
 * `app.register(opsConsole(rt), { prefix: '/ops' })`. Throws a ConfigError at registration when
 * ENS_OPS_ISSUER is plain http off loopback.
 *
 * The signed-in console (its OIDC client, sessions, CSRF and every page) is imported only where
 * ENS_OPS_ISSUER is set: elsewhere it would cost every API process 0.08–0.14 s of CPU at start
 * to load code that only answers "not configured". It is handed serveAsset rather than importing
 * it, so that ASSETS stays in this module's bundle, whose place ../assets is relative to (a module
 * shared with the dynamic import would be split into dist/chunks/).
 */
export function opsConsole(rt: Runtime): (app: FastifyInstance) => Promise<void> {
  return async (app) => {
    // The console is not part of the public API: keep its routes out of the OpenAPI document.
    app.addHook('onRoute', (route) => {
      route.schema = { ...(route.schema ?? {}), hide: true } as typeof route.schema;
    });
    app.addHook('onRequest', async (_req, reply) => {
      reply.headers(SECURITY_HEADERS);
    });
    const ops = rt.config.ops;
    if (!ops) {
      app.get<{ Params: { name: string } }>('/assets/:name', serveAsset);
      app.all('/', notConfigured);
      app.all('/*', notConfigured);
      rt.logger?.info(
        'the operations console is not configured (ENS_OPS_ISSUER unset): /ops/ says so',
      );
      return;
    }
    const { signedInConsole } = await import('./signed-in-console.ts');
    await signedInConsole(app, rt, ops, serveAsset);
  };
}
