import { CHANNELS, type Channel } from '@ens/core';
import { checkConfig, checkPlugin, PluginLoadError, type PluginContext, type Provider, type ProviderPlugin } from '@ens/plugin-sdk';

export { checkPlugin, PluginLoadError };

export interface LoadedProvider {
  /** The plugin's name; recorded as the delivery's provider and used to match status reports. */
  name: string;
  provider: Provider;
}

/**
 * Refuses settings for a package that no channel uses: a misspelt package name in
 * ENS_PROVIDER_CONFIG would otherwise leave the real plugin on its defaults without a word.
 */
export function checkProviderConfig(byChannel: Readonly<Record<Channel, string>>, providerConfig: Readonly<Record<string, unknown>>): void {
  const used = new Set(Object.values(byChannel));
  const stray = Object.keys(providerConfig).find((pkg) => !used.has(pkg));
  if (stray !== undefined) {
    throw new PluginLoadError(`ENS_PROVIDER_CONFIG has settings for ${stray}, which ENS_PROVIDERS assigns to no channel (in use: ${[...used].join(', ')})`);
  }
}

/**
 * Imports each configured plugin package once, validates its configuration and creates one
 * provider per package, shared by the channels that name it. Fails at start-up, never mid-send.
 *
 * Every package is checked before any provider is created, and providers already created are
 * closed when a later one fails: a refused start must not leave connections or timers open.
 */
export async function loadProviders(
  byChannel: Readonly<Record<Channel, string>>,
  configFor: (pkg: string) => unknown,
  contextFor: (pluginName: string) => PluginContext,
  importer: (pkg: string) => Promise<unknown> = (pkg) => import(pkg),
): Promise<Map<Channel, LoadedProvider>> {
  const checked = new Map<string, { plugin: ProviderPlugin; config: unknown }>();
  for (const channel of CHANNELS) {
    const pkg = byChannel[channel];
    let entry = checked.get(pkg);
    if (!entry) {
      let mod: unknown;
      try {
        mod = await importer(pkg);
      } catch (e) {
        throw new PluginLoadError(`provider plugin ${pkg} could not be imported (is it installed?): ${(e as Error).message}`);
      }
      const plugin = checkPlugin(pkg, mod);
      const config = checkConfig(pkg, plugin, configFor(pkg));
      entry = { plugin, config };
      checked.set(pkg, entry);
    }
    if (!entry.plugin.channels.includes(channel)) {
      throw new PluginLoadError(`provider plugin ${pkg}: channels does not include ${channel}, but ENS_PROVIDERS assigns it to ${channel}`);
    }
  }

  const made = new Map<string, LoadedProvider>();
  try {
    for (const [pkg, { plugin, config }] of checked) {
      made.set(pkg, { name: plugin.name, provider: await plugin.create(config, contextFor(plugin.name)) });
    }
  } catch (e) {
    for (const loaded of made.values()) await loaded.provider.close?.().catch(() => {});
    throw e;
  }
  return new Map(CHANNELS.map((channel) => [channel, made.get(byChannel[channel])!]));
}
