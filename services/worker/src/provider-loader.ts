import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CHANNELS, type Channel } from '@ens/core';
import {
  checkConfig,
  checkPlugin,
  PluginLoadError,
  type PluginContext,
  type Provider,
  type ProviderPlugin,
  type PushPlatform,
} from '@ens/plugin-sdk';

export { checkPlugin, PluginLoadError };

export interface LoadedProvider {
  /** The plugin's name; recorded as the delivery's provider and used to match status reports. */
  name: string;
  /** The package it came from, as named in ENS_PROVIDERS. */
  pkg: string;
  provider: Provider;
  /** For device push plugins: the platforms they reach; null for everything else. */
  pushPlatforms: readonly PushPlatform[] | null;
}

/** Each channel's providers in order of preference, and every provider once. */
export interface LoadedProviders {
  byChannel: Map<Channel, LoadedProvider[]>;
  all: LoadedProvider[];
}

type ProviderLists = Readonly<Record<Channel, readonly string[]>>;

/**
 * Refuses settings for a package that no channel uses: a misspelt package name in
 * ENS_PROVIDER_CONFIG would otherwise leave the real plugin on its defaults without a word.
 */
export function checkProviderConfig(
  byChannel: ProviderLists,
  providerConfig: Readonly<Record<string, unknown>>,
): void {
  const used = new Set(Object.values(byChannel).flat());
  const stray = Object.keys(providerConfig).find((pkg) => !used.has(pkg));
  if (stray !== undefined) {
    throw new PluginLoadError(
      `ENS_PROVIDER_CONFIG has settings for ${stray}, which ENS_PROVIDERS assigns to no channel (in use: ${[...used].join(', ')})`,
    );
  }
}

/**
 * How a plugin package is imported: from ENS_PLUGIN_DIR first when it is set (a directory of its
 * own, `npm install --prefix DIR PACKAGE`, so adding a third-party plugin changes neither the
 * repository's package.json nor its lock file, and an image gets plugins by a build argument),
 * then as ENS's own dependencies (the plugins of this repository). The plugin's own imports
 * (the SDK, its libraries) resolve from where it is installed.
 */
export function pluginImporter(pluginDir: string | undefined): (pkg: string) => Promise<unknown> {
  if (pluginDir === undefined) return (pkg) => import(pkg);
  const fromDir = createRequire(path.join(pluginDir, 'package.json'));
  return async (pkg) => {
    let resolved: string;
    try {
      resolved = fromDir.resolve(pkg);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw e;
      return import(pkg);
    }
    return import(pathToFileURL(resolved).href);
  };
}

/**
 * Imports each configured plugin package once, validates its configuration and creates one
 * provider per package, shared by the channels that name it. Fails at start-up, never mid-send.
 *
 * Every package is checked before any provider is created, and providers already created are
 * closed when a later one fails: a refused start must not leave connections or timers open.
 */
export async function loadProviders(
  byChannel: ProviderLists,
  configFor: (pkg: string) => unknown,
  contextFor: (pluginName: string) => PluginContext,
  importer: (pkg: string) => Promise<unknown> = (pkg) => import(pkg),
): Promise<LoadedProviders> {
  const checked = new Map<string, { plugin: ProviderPlugin; config: unknown }>();
  const names = new Map<string, string>();
  for (const channel of CHANNELS) {
    for (const pkg of byChannel[channel]) {
      let entry = checked.get(pkg);
      if (!entry) {
        let mod: unknown;
        try {
          mod = await importer(pkg);
        } catch (e) {
          throw new PluginLoadError(
            `provider plugin ${pkg} could not be imported (is it installed?): ${(e as Error).message}`,
          );
        }
        const plugin = checkPlugin(pkg, mod);
        // The name keys webhook paths and status reports, so two packages may not share one.
        const other = names.get(plugin.name);
        if (other !== undefined)
          throw new PluginLoadError(
            `provider plugins ${other} and ${pkg} are both named "${plugin.name}"; only one can be used`,
          );
        names.set(plugin.name, pkg);
        entry = { plugin, config: checkConfig(pkg, plugin, configFor(pkg)) };
        checked.set(pkg, entry);
      }
      if (!entry.plugin.channels.includes(channel)) {
        throw new PluginLoadError(
          `provider plugin ${pkg}: channels does not include ${channel}, but ENS_PROVIDERS assigns it to ${channel}`,
        );
      }
    }
  }

  const made = new Map<string, LoadedProvider>();
  try {
    for (const [pkg, { plugin, config }] of checked) {
      const provider = await plugin.create(config, contextFor(plugin.name));
      made.set(pkg, {
        name: plugin.name,
        pkg,
        provider,
        pushPlatforms: plugin.pushPlatforms ?? null,
      });
    }
  } catch (e) {
    for (const loaded of made.values()) await loaded.provider.close?.().catch(() => {});
    throw e;
  }
  return {
    byChannel: new Map(
      CHANNELS.map((channel) => [channel, byChannel[channel].map((pkg) => made.get(pkg)!)]),
    ),
    all: [...made.values()],
  };
}

/** Closes every provider once. */
export async function closeProviders(loaded: LoadedProviders): Promise<void> {
  for (const p of loaded.all) await p.provider.close?.();
}
