import semver from 'semver';
import { Compile } from 'typebox/compile';
import { CHANNELS, PUSH_PLATFORMS, SDK_VERSION, type ProviderPlugin } from './contract.ts';
import { OperatorError } from './ens-error.ts';

/**
 * A provider plugin that does not load, or whose settings are wrong: the start stops, naming the
 * plugin and the field.
 *
 * The checks ENS's loader makes at start-up and the conformance kit makes for a plugin author:
 * one implementation, so a plugin that passes `ens-plugin-check` is one the loader accepts.
 */
export class PluginLoadError extends OperatorError {
  static override readonly code: string = 'ENS_ERR_PLUGIN';
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
  const names = (extra?.params as { additionalProperties?: unknown } | undefined)
    ?.additionalProperties;
  if (extra && Array.isArray(names) && names.length > 0) {
    refuse(
      pkg,
      `config ${extra.instancePath}/${String(names[0])}`,
      'is not a setting this plugin knows',
    );
  }
  const first = errors[0];
  refuse(pkg, `config ${first?.instancePath || '/'}`, first?.message ?? 'is invalid');
}

/** Checks a plugin module's default export and names the first bad field. */
export function checkPlugin(pkg: string, mod: unknown): ProviderPlugin {
  const p = (mod as { default?: unknown } | null)?.default;
  if (p === null || typeof p !== 'object')
    refuse(pkg, 'default export', 'must be the plugin object');
  const o = p as Record<string, unknown>;
  if (typeof o.name !== 'string' || !/^[a-z0-9][a-z0-9-]*$/.test(o.name))
    refuse(pkg, 'name', 'must be a lower-case name such as "twilio"');
  if (
    !Array.isArray(o.channels) ||
    o.channels.length === 0 ||
    !o.channels.every((c) => (CHANNELS as readonly unknown[]).includes(c))
  ) {
    refuse(pkg, 'channels', `must list one or more of ${CHANNELS.join(', ')}`);
  }
  if (typeof o.sdk !== 'string' || semver.validRange(o.sdk) === null)
    refuse(pkg, 'sdk', 'must be a semver range such as "^1.0.0"');
  if (!semver.satisfies(SDK_VERSION, o.sdk as string))
    refuse(pkg, 'sdk', `range "${o.sdk}" does not include this ENS's plugin SDK ${SDK_VERSION}`);
  if (o.configSchema === null || typeof o.configSchema !== 'object')
    refuse(pkg, 'configSchema', 'must be a TypeBox (JSON) schema');
  if (typeof o.create !== 'function')
    refuse(pkg, 'create', 'must be a function (config, context) => provider');
  if (o.pushPlatforms !== undefined) {
    if (!(o.channels as unknown[]).includes('push'))
      refuse(pkg, 'pushPlatforms', 'is only for plugins whose channels include push');
    if (
      !Array.isArray(o.pushPlatforms) ||
      o.pushPlatforms.length === 0 ||
      !o.pushPlatforms.every((x) => (PUSH_PLATFORMS as readonly unknown[]).includes(x))
    ) {
      refuse(pkg, 'pushPlatforms', `must list one or more of ${PUSH_PLATFORMS.join(', ')}`);
    }
  }
  return p as ProviderPlugin;
}

/**
 * Validates a plugin's configuration against its schema, with the schema's defaults filled in,
 * and returns it; throws a PluginLoadError naming the first bad field.
 */
export function checkConfig(pkg: string, plugin: ProviderPlugin, raw: unknown): unknown {
  const check = Compile(plugin.configSchema);
  const config = check.Default(structuredClone(raw ?? {}));
  if (!check.Check(config)) configRefusal(pkg, check.Errors(config) as readonly SchemaError[]);
  return config;
}
