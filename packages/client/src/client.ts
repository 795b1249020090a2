import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { paths } from './schema.js';
import { TokenSource, type ClientCredentials } from './tokens.js';

export type EnsApi = Client<paths>;
export type Handoff = paths['/v2/messages']['post']['requestBody']['content']['application/json'];
export type AcceptedHandoff =
  paths['/v2/messages']['post']['responses'][202]['content']['application/json'];
/** One entry of a tenant's suppression list, as the API returns it. */
export type Suppression =
  paths['/v2/tenants/{tenant}/suppressions/{channel}/{address}']['put']['responses'][201]['content']['application/json'];

/** POST /v2/messages with its required Idempotency-Key, typed by the document. */
const sender = (api: EnsApi) => (handoff: Handoff, idempotencyKey: string) =>
  api.POST('/v2/messages', {
    params: { header: { 'idempotency-key': idempotencyKey } },
    body: handoff,
  });

export interface EnsClientOptions extends ClientCredentials {
  /**
   * Tokens from elsewhere (shared between clients, or a subclass in a test); default: these
   * credentials.
   */
  tokens?: TokenSource;
}

export interface EnsClient {
  /** Every operation of the document, typed; /v2/ calls carry a token. */
  api: EnsApi;
  tokens: TokenSource;
  /**
   * POST /v2/messages. The Idempotency-Key is required: derive it from a stable event of yours
   * (an order id and what happened to it), so a retry of the same event is a replay.
   */
  send: ReturnType<typeof sender>;
}

/**
 * A typed ENS client: openapi-fetch over the generated schema, with client-credentials tokens
 * minted before they are needed, refreshed before they expire, and re-minted once when ENS
 * answers 401 (a token the server no longer accepts, e.g. after a key rotation).
 */
export function createEnsClient(opts: EnsClientOptions): EnsClient {
  const tokens = opts.tokens ?? new TokenSource(opts);
  const doFetch = opts.fetch ?? globalThis.fetch;
  // The request as it was before it was sent, to send again after a 401 (a body reads once).
  const unsent = new Map<string, { request: Request; token: string }>();
  const auth: Middleware = {
    async onRequest({ request, id }) {
      if (!new URL(request.url).pathname.startsWith('/v2/')) return request;
      const token = await tokens.token();
      request.headers.set('authorization', `Bearer ${token}`);
      unsent.set(id, { request: request.clone(), token });
      return request;
    },
    async onResponse({ response, id }) {
      const sent = unsent.get(id);
      unsent.delete(id);
      if (!sent || response.status !== 401) return response;
      tokens.invalidate(sent.token);
      const retry = sent.request;
      retry.headers.set('authorization', `Bearer ${await tokens.token()}`);
      return doFetch(retry);
    },
    onError({ id }) {
      unsent.delete(id);
    },
  };
  const api = createClient<paths>({
    baseUrl: opts.baseUrl,
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });
  api.use(auth);
  return {
    api,
    tokens,
    send: sender(api),
  };
}
