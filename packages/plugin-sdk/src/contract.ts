import type { TSchema } from 'typebox';

/**
 * The channels ENS delivers on. This is the one list: ENS's schemas, configuration and work queues
 * derive theirs from it (the SDK is published alone and imports no other workspace, which is why
 * the list lives here and not in the core). A channel added here needs its row in ENS's channel
 * table (@ens/core's domain/channels.ts: its rules, limits and sample) and its sample message in
 * the conformance kit (conformance/sample-message.ts); the typecheck names both.
 */
export const CHANNELS = ['sms', 'email', 'push', 'whatsapp'] as const;
export type Channel = (typeof CHANNELS)[number];

/**
 * The kinds of device a push provider can reach; a device is registered with one of them. The one
 * list, like CHANNELS (the devices table's CHECK constraint repeats it, as SQL must).
 */
export const PUSH_PLATFORMS = ['fcm', 'apns', 'webpush'] as const;
export type PushPlatform = (typeof PUSH_PLATFORMS)[number];

/** A browser's PushSubscription, as `subscription.toJSON()` gives it. */
export interface WebPushSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** One device of the push recipient, from the tenant's device registry. */
export interface PushDevice {
  /**
   * The registration token (FCM), device token (APNs) or the caller's id for a web subscription.
   */
  token: string;
  platform: PushPlatform;
  /** For webpush: where and how to encrypt to. */
  subscription: WebPushSubscription | null;
}

/**
 * The per-tenant settings that bundled plugins read, set through the tenants API. Each overrides
 * the plugin's default of the same meaning; a third-party plugin may read keys of its own.
 */
export interface TenantSettings {
  /** sms: the sender id or number messages come from. */
  sender_id?: string;
  /** email: the From address. */
  from_address?: string;
  /** email: the From display name. */
  from_name?: string;
  /** whatsapp: the Cloud API phone number id to send from. */
  whatsapp_phone_number_id?: string;
  /**
   * push: which of the plugin's configured apps (FCM project, APNs topic, VAPID identity) to use.
   */
  push_app?: string;
  [key: string]: unknown;
}

/** The version of this contract; plugins declare the range they support in `sdk`. */
export const SDK_VERSION = '1.3.0';

/** What a provider is asked to send: one recipient on one channel, one attempt. */
export interface OutboundMessage {
  deliveryId: string;
  /**
   * Attempt number from 1; stable ids such as `${deliveryId}:${attempt}` make provider-side dedupe
   * possible.
   */
  attempt: number;
  channel: Channel;
  /**
   * Normalised: E.164 with `+` for sms/whatsapp, the address for email, the caller's user id for
   * push.
   */
  recipient: string;
  tenant: string;
  /** Per-tenant settings (sender id, from address…) that override the plugin's defaults. */
  tenantSettings: Readonly<TenantSettings>;
  eventType: string;
  reference: string | null;
  /**
   * The content object of the spec for this channel. Inline images carry `storage_key` instead of
   * `data`; read their bytes with `context.media.get(storage_key)`.
   */
  content: Readonly<Record<string, unknown>>;
  /**
   * push, for plugins that declare `pushPlatforms`: the one device this send goes to. ENS reads
   * the user's devices from its registry, sends to each through the provider of its platform, and
   * counts the delivery sent when at least one device accepted it.
   */
  device?: PushDevice;
  /**
   * email (since SDK 1.3): the envelope sender (SMTP MAIL FROM) ENS wants, a return path signed for
   * this delivery at the operator's return-path domain, so that a bounce written later by any relay
   * comes back to ENS's inbound role and is matched to this delivery. Absent when no return-path
   * domain is configured; a plugin that cannot set the envelope sender ignores it.
   */
  returnPath?: string;
  /**
   * email (since SDK 1.3): for event types the client marks as bulk, the one-click unsubscribe of
   * RFC 8058. A plugin that writes headers sends `List-Unsubscribe: <url>, <mailto>` and
   * `List-Unsubscribe-Post: List-Unsubscribe=One-Click`. `url` is the https URL a POST to which
   * unsubscribes; `mailto` a `mailto:` URI to ENS's inbound role, or null when no return-path
   * domain is configured.
   */
  unsubscribe?: { url: string; mailto: string | null };
}

export interface SendResult {
  /** The provider's own id for the message; becomes provider_message_id. */
  providerMessageId: string;
}

/** A status the provider reported after the send (webhook, delivery receipt, simulated handset). */
export interface StatusUpdate {
  providerMessageId: string;
  status: 'delivered' | 'read' | 'failed';
  at: Date;
  /** For failed: the provider's reason, recorded as last_error. */
  error?: string;
}

/**
 * What a report says about a recipient (since SDK 1.3). `hard_bounce`, `complaint`, `opt_out` and
 * `invalid_recipient` suppress the address; `soft_bounce` suppresses it for a while; `opt_in` (an
 * SMS START) lifts an earlier opt-out.
 */
export type RecipientReportKind =
  | 'hard_bounce'
  | 'soft_bounce'
  | 'complaint'
  | 'opt_out'
  | 'opt_in'
  | 'invalid_recipient';

/**
 * A provider's asynchronous word about a recipient (since SDK 1.3): a bounce or complaint about a
 * message it sent, or an opt-out or opt-in the recipient sent in (an SMS STOP or START, a WhatsApp
 * block). Name the message when the report is about one (`providerMessageId`); otherwise name the
 * address, its channel and, for an inbound keyword, the sender number it was sent to.
 */
export interface RecipientReport {
  kind: RecipientReportKind;
  /** The provider's id of the message the report is about, when it names one. */
  providerMessageId?: string;
  /**
   * With providerMessageId: the recipient refused only this kind of message (WhatsApp 131050,
   * marketing stopped), so the entry covers that message's event type alone, not every one.
   */
  eventTypeOnly?: boolean;
  /** Without providerMessageId: the recipient's address (E.164 phone number, email address). */
  address?: string;
  /** With address: the channel the address is on. */
  channel?: Channel;
  /**
   * With address: the sender the recipient wrote to (an SMS STOP to a number). ENS applies the
   * report to the tenants that send from it: those whose `sender_id` (or
   * `whatsapp_phone_number_id`) is this id, and, when `isDefault`, those with none of their own.
   */
  sender?: { id: string; isDefault: boolean };
  at: Date;
  /**
   * The provider's own words (a DSN's diagnostic, an error code and message, the keyword), kept as
   * evidence.
   */
  detail: string;
}

/** What ENS did with a RecipientReport. */
export interface RecipientReportOutcome {
  /** The suppression entries written or lifted (0 when the report matched nothing ENS sent). */
  entries: number;
}

export interface PluginLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * ENS's outbound-address guard, for requests to an address a client supplied (a Web Push
 * endpoint, a URL from tenant settings): private, loopback, link-local and metadata addresses are
 * refused after DNS, the connection goes to the address that was checked, and redirects are not
 * followed. Requests to a provider's own fixed API need none of this; use plain fetch for those.
 */
export interface OutboundGuard {
  /**
   * Checks a URL's form and IP-literal host; `detail` says why it is refused. DNS is checked by
   * fetch.
   */
  check(url: string): { ok: true } | { ok: false; detail: string };
  /**
   * fetch through the guard. Rejects with an error whose `code` is ENS_ERR_OUTBOUND_REFUSED when
   * the address is refused; a 3xx answer comes back as it is, never followed.
   */
  fetch(url: string, init?: RequestInit): Promise<Response>;
}

export interface PluginContext {
  logger: PluginLogger;
  /** Applies a status report to the delivery with that provider_message_id. */
  reportStatus(update: StatusUpdate): Promise<void>;
  /**
   * Records a bounce, complaint, opt-out or opt-in about a recipient in ENS's suppression list
   * (since SDK 1.3). A synchronous refusal of a send is not reported here: throw recipientError.
   */
  reportRecipient(report: RecipientReport): Promise<RecipientReportOutcome>;
  media: { get(key: string): Promise<{ bytes: Buffer; mediaType: string }> };
  /** For every request to an address a client supplied (since SDK 1.1). */
  outbound: OutboundGuard;
}

/** An HTTP route a provider mounts for inbound webhooks, under /webhooks/<plugin name>/. */
export interface WebhookRequest {
  /** Header names are lower case. */
  headers: Record<string, string | string[] | undefined>;
  query: Record<string, string>;
  /** The body exactly as received: signatures are computed over these bytes. */
  rawBody: Buffer;
  /**
   * The URL the request was made to, as ENS saw it (scheme, host and path with query). Behind a
   * proxy it may differ from the public URL the provider signed; plugins whose signature covers
   * the URL (Twilio) take the public URL from their configuration.
   */
  url: string;
}

export interface WebhookResponse {
  status: number;
  /** A string or Buffer is sent as is; anything else as JSON. */
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * An HTTP route a provider mounts for inbound webhooks, served by the API role at
 * /webhooks/<plugin name><path>. Authenticity is the plugin's job (provider signatures): ENS
 * applies no client authentication to these routes.
 */
export interface WebhookRoute {
  method: 'GET' | 'POST';
  /** Starts with '/'; '' for the plugin's root is not allowed. */
  path: string;
  handler(req: WebhookRequest): Promise<WebhookResponse>;
}

export interface Provider {
  /** Sends one message. Throws a ProviderError (see errors) to say how it failed. */
  send(message: OutboundMessage): Promise<SendResult>;
  /**
   * The most sends per second this provider (as configured: an account tier, a relay's limit)
   * accepts. ENS holds all worker processes together to it instead of learning it from 429s;
   * the operator's ENS_PROVIDER_PACE overrides it. Since SDK 1.2.
   */
  pace?: { perSecond: number };
  routes?: WebhookRoute[];
  checkCredentials?(): Promise<void>;
  close?(): Promise<void>;
}

/** What a plugin package default-exports. */
export interface ProviderPlugin<Config = unknown> {
  name: string;
  channels: readonly Channel[];
  /** Semver range of SDK_VERSION this plugin works with, e.g. "^1.0.0". */
  sdk: string;
  configSchema: TSchema;
  /**
   * For push plugins that send to devices: the device platforms this plugin reaches. With it, the
   * plugin gets one `device` per send from ENS's device registry; without it (the sandbox), push
   * sends go to the user id once, as for any other channel.
   */
  pushPlatforms?: readonly PushPlatform[];
  create(config: Config, context: PluginContext): Provider | Promise<Provider>;
}

/** Identity helper that gives a plugin author type checking on the default export. */
export function definePlugin<Config>(plugin: ProviderPlugin<Config>): ProviderPlugin<Config> {
  return plugin;
}
