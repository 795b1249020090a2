import type { FastifyInstance } from 'fastify';

/**
 * The security headers of /docs and /ops/, with a CSP that allows nothing but this page's own HTML.
 */
const HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

const PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>ENS</title></head>
<body>
<h1>ENS — message delivery service</h1>
<p>This is an API. Where to go from here:</p>
<ul>
<li><a href="/docs">/docs</a>: the API reference (OpenAPI), with a console to try it.</li>
<li><a href="/ops/">/ops/</a>: the operations console, for staff (sign-in through your identity provider).</li>
<li><a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a>, <a href="/metrics">/metrics</a>: liveness, readiness, Prometheus.</li>
</ul>
<p>Sending starts with a token: <code>POST /v1/oauth2/token/</code> with your client id and secret (see the README).</p>
</body>
</html>
`;

/**
 * GET /: a newcomer who opens the base URL in a browser finds the way to the docs and the console.
 */
export function homeRoute(app: FastifyInstance): void {
  app.get('/', { schema: { hide: true } }, async (_req, reply) =>
    reply.headers(HEADERS).send(PAGE),
  );
}
