import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import apiPackage from '../../package.json' with { type: 'json' };

/**
 * The OpenAPI document's own parts; the operations come from the route schemas.
 *
 * `servers` is `/`: the document is served by the ENS it describes, so a relative URL is right
 * behind any host, port or proxy, where a configured absolute one would be wrong for every caller
 * that reaches ENS by another name. `info.version` is the package's version (kept equal to the
 * root package.json's by test/api/openapi-live.test.ts).
 */
export const openapiOptions: FastifyDynamicSwaggerOptions = {
  openapi: {
    openapi: '3.1.0',
    info: {
      title: 'ENS — message delivery service',
      version: apiPackage.version,
      description:
        'Send one composed message across sms, email, push and whatsapp; follow every delivery ' +
        'through signed callbacks and the pull endpoint. ' +
        'Every /v2/ operation needs a client-credentials token from POST /v1/oauth2/token/.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/', description: 'The ENS serving this document' }],
    tags: [
      { name: 'auth', description: 'Client-credentials tokens (RFC 6749 §4.4)' },
      { name: 'messages', description: 'Sending handoffs' },
      { name: 'deliveries', description: 'The delivery record, as a change feed' },
      { name: 'tenants', description: "The client's tenants and their provider settings" },
      { name: 'devices', description: 'The push device registry' },
      {
        name: 'suppressions',
        description:
          "A tenant's suppression list: addresses no send reaches (bounces, complaints, " +
          'opt-outs, entries by hand)',
      },
      {
        name: 'unsubscribe',
        description:
          "One-click unsubscribe (RFC 8058): the link in a bulk email's List-Unsubscribe " +
          'header, used by mailbox providers and people without a token',
      },
      { name: 'operations', description: 'Liveness, readiness and Prometheus metrics; no token' },
      {
        name: 'provider webhooks',
        description:
          "Status reports from providers, authenticated by each provider's own signature; " +
          'listed for each configured provider plugin that has them',
      },
    ],
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'Client-credentials token from POST /v1/oauth2/token/',
        },
      },
    },
    security: [{ bearer: [] }],
  },
};
