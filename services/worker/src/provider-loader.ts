import semver from 'semver';
import { Compile } from 'typebox/compile';
import { CHANNELS, type Channel } from '@ens/core';
import { SDK_VERSION, type PluginContext, type Provider, type ProviderPlugin } from '@ens/plugin-sdk';

export interface LoadedProvider {
  /** The plugin's name; recorded as the delivery's provider and used to match status reports. */
  name: string;
  provider: Provider;
}

export class PluginLoadError extends Error {
  readonly code = 'ENS_ERR_PLUGIN';
}

function refuse(pkg: string, field: string, why: string): never {
  throw new PluginLoadError(`provider plugin ${pkg}: ${field} ${why}`);
}

interface SchemaError {
  keyword: string;
  instancePath: string;
  message: string;
  params: object;
}

/**
 * Names the first bad setting. An unknown key (a typo such as `handsetDelay`) is named as such:
 * the schema's own message for it ("schema is false") would not tell an operator what to fix.
 */
function configRefusal(pkg: string, errors: readonly SchemaError[]): never {
  const extra = errors.find((e) => e.keyword === 'additionalProperties');
  const names = (extra?.params as { additionalProperties?: unknown } | undefined)?.additionalProperties;
  if (extra && Array.isArray(names) && names.length > 0) {
    refuse(pkg, `config ${extra.instancePath}/${String(names[0])}`, 'is not a setting this plugin knows');
  }
  const first = errors[0];
  refuse(pkg, `config ${first?.instancePath || '/'}`, first?.message ?? 'is invalid');
}

/** Checks a plugin's default export and names the first bad field. */
export function checkPlugin(pkg: string, mod: unknown): ProviderPlugin {
  const p = (mod as { default?: unknown } | null)?.default;
  if (p === null || typeof p !== 'object') refuse(pkg, 'default export', 'must be the plugin object');
  const o = p as Record<string, unknown>;
  if (typeof o.name !== 'string' || !/^[a-z0-9][a-z0-9-]*$/.test(o.name)) refuse(pkg, 'name', 'must be a lower-case name such as "twilio"');
  if (!Array.isArray(o.channels) || o.channels.length === 0 || !o.channels.every((c) => (CHANNELS as readonly unknown[]).includes(c))) {
    refuse(pkg, 'channels', `must list one or more of ${CHANNELS.join(', ')}`);
  }
  if (typeof o.sdk !== 'string' || semver.validRange(o.sdk) === null) refuse(pkg, 'sdk', 'must be a semver range such as "^1.0.0"');
  if (!semver.satisfies(SDK_VERSION, o.sdk as string)) refuse(pkg, 'sdk', `range "${o.sdk}" does not include this ENS's plugin SDK ${SDK_VERSION}`);
  if (o.configSchema === null || typeof o.configSchema !== 'object') refuse(pkg, 'configSchema', 'must be a TypeBox (JSON) schema');
  if (typeof o.create !== 'function') refuse(pkg, 'create', 'must be a function (config, context) => provider');
  return p as ProviderPlugin;
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
      const check = Compile(plugin.configSchema);
      const config = check.Default(structuredClone(configFor(pkg) ?? {}));
      if (!check.Check(config)) configRefusal(pkg, check.Errors(config));
      entry = { plugin, config };
      checked.set(pkg, entry);
    }
    if (!entry.plugin.channels.includes(channel)) {
      refuse(pkg, 'channels', `does not include ${channel}, but ENS_PROVIDERS assigns it to ${channel}`);
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
