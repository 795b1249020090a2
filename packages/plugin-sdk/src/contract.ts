import type { TSchema } from 'typebox';

export type Channel = 'sms' | 'email' | 'push' | 'whatsapp';

/** The version of this contract; plugins declare the range they support in `sdk`. */
export const SDK_VERSION = '1.0.0';

/** What a provider is asked to send: one recipient on one channel, one attempt. */
export interface OutboundMessage {
  deliveryId: string;
  /** Attempt number from 1; stable ids such as `${deliveryId}:${attempt}` make provider-side dedupe possible. */
  attempt: number;
  channel: Channel;
  /** Normalised: E.164 with `+` for sms/whatsapp, the address for email, the caller's user id for push. */
  recipient: string;
  tenant: string;
  /** Per-tenant settings (sender id, from address…) that override the plugin's defaults. */
  tenantSettings: Readonly<Record<string, unknown>>;
  eventType: string;
  reference: string | null;
  /**
   * The content object of the spec for this channel. Inline images carry `storage_key` instead of
   * `data`; read their bytes with `context.media.get(storage_key)`.
   */
  content: Readonly<Record<string, unknown>>;
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

export interface PluginLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface PluginContext {
  logger: PluginLogger;
  /** Applies a status report to the delivery with that provider_message_id. */
  reportStatus(update: StatusUpdate): Promise<void>;
  media: { get(key: string): Promise<{ bytes: Buffer; mediaType: string }> };
}

/** An HTTP route a provider mounts for inbound webhooks, under /webhooks/<plugin name>/. */
export interface WebhookRoute {
  method: 'GET' | 'POST';
  path: string;
  handler(req: { headers: Record<string, string | string[] | undefined>; query: Record<string, string>; rawBody: Buffer; body: unknown }): Promise<{ status: number; body?: unknown; headers?: Record<string, string> }>;
}

export interface Provider {
  /** Sends one message. Throws a ProviderError (see errors) to say how it failed. */
  send(message: OutboundMessage): Promise<SendResult>;
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
  create(config: Config, context: PluginContext): Provider | Promise<Provider>;
}

/** Identity helper that gives a plugin author type checking on the default export. */
export function definePlugin<Config>(plugin: ProviderPlugin<Config>): ProviderPlugin<Config> {
  return plugin;
}
