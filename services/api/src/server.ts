import { randomUUID } from 'node:crypto';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
} from 'fastify';
import formbody from '@fastify/formbody';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { Runtime } from '@ens/core';
import { ClientDirectory, httpDuration } from '@ens/core/internal';
import { AccessTokens } from './auth/access-token.ts';
import { clientAuthenticator } from './auth/require-client.ts';
import { tokenRoute } from './auth/token-route.ts';
import { clientErrorHandler } from './client-errors.ts';
import { installErrorHandler } from './error-handler.ts';
import { httpTimeouts } from './http-timeouts.ts';
import { installJsonBodyParser } from './json-body.ts';
import { openapiOptions } from './openapi/document.ts';
import { ClientRateLimits, TokenRateLimits } from './limits/rate-limits.ts';
import { deliveriesRoute } from './routes/deliveries.ts';
import { deviceRoutes } from './routes/devices.ts';
import { healthRoutes } from './routes/health.ts';
import { homeRoute } from './routes/home.ts';
import { messagesRoute } from './routes/messages.ts';
import { suppressionRoutes } from './routes/suppressions.ts';
import { tenantRoutes } from './routes/tenants.ts';
import { unsubscribeRoutes } from './routes/unsubscribe.ts';
import { typeboxValidator } from './validation.ts';

/** What a caller's X-Request-Id may be: up to 128 characters of letters, digits and . _ : - */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The headers /docs answers with, as the console's: no framing, no sniffing, a strict CSP. */
const DOCS_HEADERS = {
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

export interface ApiOptions {
  /**
   * Route registrations the caller mounts beside the API (provider webhooks, the operations
   * console): the application composes the roles, so the API role imports no other role.
   */
  plugins?: ((app: FastifyInstance) => void | Promise<void>)[];
}

/** Builds the API role's HTTP server. The caller listens and closes it. */
export async function buildApi(rt: Runtime, opts: ApiOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: rt.logger as FastifyBaseLogger,
    ...httpTimeouts(rt.config),
    bodyLimit: rt.config.maxBodyBytes,
    // A caller's X-Request-Id is kept only when it is a sane id: it is echoed in a header and
    // written to every log line of the request, so an unbounded or odd one is replaced.
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    // Our onResponse hook logs one line per request with its latency; Fastify's own two are noise.
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: false,
    clientErrorHandler,
    // A URL Fastify's router cannot decode (%FF, an encoded surrogate) reaches no route and no
    // error handler: answered here as every other refusal is.
    frameworkErrors: (err, _req, reply) => {
      void (reply as FastifyReply).code(400).send({
        code: 'ENS_ERR_BAD_REQUEST',
        detail: `The URL cannot be decoded (${err.message}); percent-encode it as UTF-8.`,
      });
    },
    // Device tokens travel in the path (PUT …/devices/{token}); FCM tokens run past the default
    // 100.
    routerOptions: { maxParamLength: 4200 },
  });
  app.setValidatorCompiler(typeboxValidator);
  installErrorHandler(app);
  await app.register(formbody);
  installJsonBodyParser(app, rt.config.maxBodyBytes);
  await app.register(swagger, openapiOptions);
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // The UI's own CSP (with hashes for its inline script and style), framed by nobody and without
    // upgrade-insecure-requests, which would send a plain-http install's asset requests to https.
    staticCSP: true,
    transformStaticCSP: (csp) =>
      csp
        .replace(/frame-ancestors [^;]*;/, "frame-ancestors 'none';")
        .replace(/\s*upgrade-insecure-requests;?/, ''),
    uiHooks: {
      onRequest: async (_req, reply) => {
        reply.headers(DOCS_HEADERS);
      },
    },
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  app.addHook('onResponse', async (req, reply) => {
    httpDuration.observe(
      {
        method: req.method,
        route: req.routeOptions.url ?? 'unmatched',
        status: String(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
    if (reply.statusCode >= 500)
      req.log.error(
        { url: req.url, status: reply.statusCode, ms: reply.elapsedTime },
        'request failed',
      );
    else
      req.log.debug({ url: req.url, status: reply.statusCode, ms: reply.elapsedTime }, 'request');
  });

  const tokens = new AccessTokens(rt.tokenKey, rt.config.tokenTtlSeconds);
  const directory = new ClientDirectory(rt.db, rt.clients);
  await directory.start();
  app.addHook('onClose', () => directory.close());

  await tokenRoute(app, {
    clients: rt.clients,
    tokens,
    limits: new TokenRateLimits(rt.config.tokenRateLimit),
  });
  healthRoutes(app, rt);
  homeRoute(app);
  // Outside /v2/ and without sign-in: the link in a bulk email's List-Unsubscribe header.
  await unsubscribeRoutes(app, rt);

  const authenticate = clientAuthenticator(tokens, directory);
  const rateLimits = new ClientRateLimits(rt.config.processes);
  await app.register(async (v2) => {
    v2.decorateRequest('client', null as never);
    // /v2/ takes JSON only. Without this, a text/plain or form body (whose parsers the token
    // endpoint and webhooks need) would reach the schema and get a 400 "must be object", where
    // every other non-JSON type gets a 415.
    v2.removeContentTypeParser(['text/plain', 'application/x-www-form-urlencoded']);
    v2.addHook('onRequest', async (req) => {
      await authenticate(req);
      await rateLimits.consume(req.client.id, req.client.rateLimit ?? rt.config.rateLimit);
    });
    messagesRoute(v2, rt);
    deliveriesRoute(v2, rt);
    tenantRoutes(v2, rt);
    suppressionRoutes(v2, rt);
    deviceRoutes(v2, rt);
  });
  for (const register of opts.plugins ?? []) await register(app);
  return app;
}
