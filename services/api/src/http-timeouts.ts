import type { FastifyServerOptions } from 'fastify';
import type { Config } from '@ens/core';

/*
 * Slow clients. Fastify turns Node's request timeout off and leaves sockets without an idle limit,
 * so a client that sent a header line every 5 s, or a body a byte every 5 s, held its connection
 * for as long as it liked: 300 of them stayed open for 330 s. Every HTTP server ENS runs (the API
 * with the console and the provider webhooks, and the health port of the other roles) takes these
 * options, so each port closes such connections after ENS_HTTP_HEADERS_TIMEOUT (headers) or
 * ENS_HTTP_REQUEST_TIMEOUT (the whole request) and drops sockets idle for ENS_HTTP_IDLE_TIMEOUT.
 */

/** Node checks the header and request deadlines on a timer; at most this long apart. */
const MAX_CHECK_INTERVAL_MS = 5_000;

/** The Fastify options that bound how long a client may take; pass them to `Fastify()`. */
export function httpTimeouts(
  config: Pick<Config, 'httpHeadersTimeoutMs' | 'httpRequestTimeoutMs' | 'httpIdleTimeoutMs'>,
): Pick<FastifyServerOptions, 'connectionTimeout' | 'keepAliveTimeout' | 'requestTimeout'> & {
  http: { headersTimeout: number; requestTimeout: number; connectionsCheckingInterval: number };
} {
  const shortest = Math.min(config.httpHeadersTimeoutMs, config.httpRequestTimeoutMs);
  return {
    requestTimeout: config.httpRequestTimeoutMs,
    keepAliveTimeout: config.httpIdleTimeoutMs,
    connectionTimeout: config.httpIdleTimeoutMs,
    http: {
      headersTimeout: config.httpHeadersTimeoutMs,
      requestTimeout: config.httpRequestTimeoutMs,
      // A quarter of the shortest deadline, so a connection outlives its deadline by little.
      connectionsCheckingInterval: Math.max(
        100,
        Math.min(MAX_CHECK_INTERVAL_MS, Math.floor(shortest / 4)),
      ),
    },
  };
}
