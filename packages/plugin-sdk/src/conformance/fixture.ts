import type { OutboundMessage, StatusUpdate } from '../contract.ts';

/**
 * What a plugin package exports as `./conformance` (default export) so that `ens-plugin-check`
 * and the tap helper can exercise it: a way to start whatever the plugin talks to (a local server
 * speaking the provider's protocol) and the sends and webhooks that produce each outcome.
 */
export interface ConformanceFixture<Config = unknown> {
  start(): Promise<ConformanceTarget<Config>>;
}

export interface WebhookCase {
  method: 'GET' | 'POST';
  /** The route's path as the plugin declares it, with any query string. */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The URL the provider would have called (for URL-signing providers); defaults to http://ens.test/webhooks/<name><path>. */
  url?: string;
  /** The status report this request must cause (genuine cases only); omit for a handshake such as a GET challenge. */
  report?: Pick<StatusUpdate, 'status'> & Partial<StatusUpdate>;
  /** For handshakes: the exact body the route must answer with. */
  responseBody?: string;
}

export interface ConformanceTarget<Config = unknown> {
  /** A configuration pointing the plugin at the target; must pass the plugin's configSchema. */
  config: Config;
  /** A configuration the schema must refuse (a missing credential, a malformed URL). */
  invalidConfig?: unknown;
  /** The same target with wrong credentials: checkCredentials (when the plugin has it) must reject. */
  wrongCredentials?: Config;
  /** One message per outcome the provider can produce; omit the outcomes it cannot. */
  sends: {
    accepted: OutboundMessage;
    transient?: OutboundMessage;
    permanent?: OutboundMessage;
    rateLimited?: OutboundMessage;
    /** push: a device the provider says is gone. */
    deviceGone?: OutboundMessage;
  };
  /** The retry hint (ms) the rate-limited answer carries, when the provider gives one. */
  rateLimitHintMs?: number;
  /** Media the sends refer to by storage_key (inline images). */
  media?: Record<string, { bytes: Buffer; mediaType: string }>;
  /** Webhook requests about the accepted send, built from its provider message id. */
  webhooks?(providerMessageId: string): { genuine: WebhookCase[]; forged: WebhookCase[] };
  /** A status the plugin reports by itself after the accepted send (an SMPP delivery receipt). */
  expectReport?: { status: StatusUpdate['status']; withinMs: number };
  stop(): Promise<void>;
}
