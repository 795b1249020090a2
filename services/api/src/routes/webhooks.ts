import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '@ens/core';
import { webhookRequests } from '@ens/core/internal';
import type { Provider } from '@ens/plugin-sdk';

/** Provider status payloads are small; a larger body is not a provider's. */
const WEBHOOK_BODY_LIMIT = 1024 * 1024;

export interface WebhookProvider {
  name: string;
  provider: Provider;
}

/**
 * What the document says of every provider route: the plugin decides the answer, ENS the body
 * limit. The bodies are the provider's formats (text, XML, JSON), any of them.
 */
const WEBHOOK_ANSWERS = {
  200: {
    description: "Accepted: the provider's expected acknowledgement",
    content: { '*/*': { schema: {} } },
  },
  '4XX': {
    description: 'Refused by the plugin: a missing or wrong signature, or a malformed report',
    content: { '*/*': { schema: {} } },
  },
};
/** A GET's body is never read, so only a POST meets the body limit. */
const webhookResponses = (method: string) =>
  method === 'POST'
    ? {
        ...WEBHOOK_ANSWERS,
        413: {
          description: `The body is over ${WEBHOOK_BODY_LIMIT} bytes (ENS_ERR_PAYLOAD_TOO_LARGE)`,
          content: { 'application/json': { schema: ErrorBody } },
        },
      }
    : WEBHOOK_ANSWERS;

/** e.g. whatsappWebhookPost, from the plugin name, the path and the method. */
function webhookOperationId(plugin: string, method: string, path: string): string {
  const words = `${plugin} ${path} ${method}`.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return words
    .map((w, i) => (i === 0 ? w.toLowerCase() : w[0]!.toUpperCase() + w.slice(1).toLowerCase()))
    .join('');
}

function firstValues(q: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries((q ?? {}) as Record<string, unknown>))
    out[k] = Array.isArray(v) ? String(v[0]) : String(v);
  return out;
}

/**
 * Mounts each provider's inbound routes at /webhooks/<plugin name><path>, outside /v2/: providers
 * authenticate with their own signatures, which the plugin checks over the raw body, so here the
 * body is kept as bytes whatever its content type.
 */
export function webhookRoutes(providers: readonly WebhookProvider[]) {
  return async (app: FastifyInstance): Promise<void> => {
    await app.register(async (wh) => {
      wh.removeAllContentTypeParsers();
      wh.addContentTypeParser(
        '*',
        { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT },
        (_req, body, done) => done(null, body),
      );
      for (const { name, provider } of providers) {
        for (const route of provider.routes ?? []) {
          wh.route({
            method: route.method,
            url: `/webhooks/${name}${route.path}`,
            // On the route too, so a 413 states this limit rather than the API's.
            bodyLimit: WEBHOOK_BODY_LIMIT,
            schema: {
              operationId: webhookOperationId(name, route.method, route.path),
              summary: `${name} provider webhook`,
              description:
                "Authenticated by the provider's own signature, which the plugin checks; what " +
                "it answers is the plugin's.",
              tags: ['provider webhooks'],
              security: [],
              response: webhookResponses(route.method),
            },
            handler: async (req, reply) => {
              const res = await route.handler({
                headers: req.headers,
                query: firstValues(req.query),
                rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
                url: `${req.protocol}://${req.host}${req.url}`,
              });
              webhookRequests.inc({ plugin: name, status: String(res.status) });
              reply.code(res.status);
              for (const [k, v] of Object.entries(res.headers ?? {})) reply.header(k, v);
              if (res.body === undefined) return reply.send();
              if (typeof res.body === 'string' || Buffer.isBuffer(res.body)) {
                if (!reply.hasHeader('content-type')) reply.type('text/plain; charset=utf-8');
                return reply.send(res.body);
              }
              return reply.type('application/json').send(JSON.stringify(res.body));
            },
          });
        }
      }
    });
  };
}
