import type { OutboundMessage, RecipientReport, StatusUpdate } from '../contract.ts';
import type { RecipientRefusal } from '../errors.ts';

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
  /**
   * The URL the provider would have called (for URL-signing providers); defaults to
   * http://ens.test/webhooks/<name><path>.
   */
  url?: string;
  /**
   * The status report this request must cause (genuine cases only); omit for a handshake such as a
   * GET challenge.
   */
  report?: Pick<StatusUpdate, 'status'> & Partial<StatusUpdate>;
  /** For handshakes: the exact body the route must answer with. */
  responseBody?: string;
  /**
   * The report about a recipient this request must cause (an inbound STOP, a block; since SDK
   * 1.3), or null when this genuine request must cause none (a HELP).
   */
  recipientReport?: RecipientReportExpectation | null;
}

/**
 * What a recipient report must say (since SDK 1.3): its `kind`, and each other field given here
 * (address, channel, sender, providerMessageId, detail) exactly; `at` must be a valid date.
 */
export type RecipientReportExpectation = Pick<RecipientReport, 'kind'> &
  Partial<Omit<RecipientReport, 'kind' | 'at'>>;

/**
 * A send the provider refuses because of its recipient, and the refusal it must carry (since SDK
 * 1.3).
 */
export interface RecipientRefusalCase {
  send: OutboundMessage;
  refusal: RecipientRefusal;
}

/**
 * Something the provider's own connection brings in about a recipient (an SMPP deliver_sm with an
 * MO STOP; since SDK 1.3), for providers that report without a webhook.
 */
export interface RecipientEventCase {
  /** What it is, for the check's name: "an MO STOP". */
  name: string;
  /** Makes the provider's side send it; rejects when the plugin does not answer it. */
  trigger(): Promise<void>;
  /** The report it must cause, or null for none (an MO that is not a keyword). */
  recipientReport: RecipientReportExpectation | null;
  /** How long after trigger() resolves the report may take. */
  withinMs: number;
}

export interface ConformanceTarget<Config = unknown> {
  /** A configuration pointing the plugin at the target; must pass the plugin's configSchema. */
  config: Config;
  /** A configuration the schema must refuse (a missing credential, a malformed URL). */
  invalidConfig?: unknown;
  /**
   * The same target with wrong credentials: checkCredentials (when the plugin has it) must reject.
   */
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
  /**
   * Sends the provider refuses because of the recipient (since SDK 1.3): each must throw
   * recipientError with its refusal.
   */
  recipientRefusals?: RecipientRefusalCase[];
  /**
   * Reports about recipients the provider's connection brings in without a webhook (since SDK 1.3).
   */
  recipientEvents?: RecipientEventCase[];
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
