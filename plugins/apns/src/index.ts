import { definePlugin, type PluginContext, type Provider } from '@ens/plugin-sdk';
import { ApnsClient } from './apns-client.ts';
import { ApnsConfig } from './config.ts';
import { loadSigningKey } from './provider-token.ts';

export type { ApnsConfig } from './config.ts';
export { apnsIdFor } from './notification.ts';

/**
 * Builds the provider. `now` exists for tests that need provider tokens to age without waiting an
 * hour; ENS calls the plugin's `create`, which uses the real clock.
 */
export function createApnsProvider(
  config: ApnsConfig,
  context: PluginContext,
  opts: { now?: () => number } = {},
): Provider {
  // Checked here so a wrong key stops ENS at start-up instead of failing every send.
  loadSigningKey(config.privateKey);
  if ((config.pushType ?? 'alert') === 'background' && config.priority === 10) {
    throw new Error(
      'apns config /priority: Apple refuses priority 10 for background pushes; use 5 or 1',
    );
  }
  const client = new ApnsClient(config, { logger: context.logger, now: opts.now });
  let closed: Promise<void> | undefined;
  return {
    send: (m) => client.send(m),
    checkCredentials: () => client.checkCredentials(),
    close() {
      closed ??= client.close();
      return closed;
    },
  };
}

export default definePlugin<ApnsConfig>({
  name: 'apns',
  channels: ['push'],
  pushPlatforms: ['apns'],
  sdk: '^1.0.0',
  configSchema: ApnsConfig,
  create: (config, context) => createApnsProvider(config, context),
});
