import t from 'tap';
import { Type } from 'typebox';
import {
  checkPlugin,
  checkProviderConfig,
  loadProviders,
  PluginLoadError,
} from '@ens/service-worker';
import { SDK_VERSION, type PluginContext, type Provider } from '@ens/plugin-sdk';

/**
 * Plugins are loaded and checked at start-up, so a bad one stops the worker with a message that
 * names the package and the field, never mid-send. (What follows a provider's error is the retry
 * policy's: packages/core/test/retry-policy.test.ts.)
 */

type Channel = 'sms' | 'email' | 'push' | 'whatsapp';

const context: PluginContext = {
  logger: { info() {}, warn() {}, error() {} },
  async reportStatus() {},
  reportRecipient: async () => ({ entries: 0 }),
  media: { get: async () => ({ bytes: Buffer.alloc(0), mediaType: 'image/png' }) },
  outbound: { check: () => ({ ok: true }), fetch: () => Promise.reject(new Error('not used')) },
};

const provider: Provider = { send: async () => ({ providerMessageId: 'p-1' }) };

/** A plugin module that passes every check; each case spoils one field. */
function goodPlugin(over: Record<string, unknown> = {}): { default: Record<string, unknown> } {
  return {
    default: {
      name: 'acme-sms',
      channels: ['sms', 'email', 'push', 'whatsapp'],
      sdk: '^1.0.0',
      configSchema: Type.Object({
        apiKey: Type.String({ minLength: 1 }),
        region: Type.Optional(Type.String({ default: 'eu' })),
      }),
      create: () => provider,
      ...over,
    },
  };
}

const allTo = (pkg: string): Record<Channel, string> => ({
  sms: pkg,
  email: pkg,
  push: pkg,
  whatsapp: pkg,
});
/** One provider per channel, as ENS_PROVIDERS without fail-over gives. */
const lists = (byChannel: Record<Channel, string>): Record<Channel, string[]> =>
  Object.fromEntries(Object.entries(byChannel).map(([ch, pkg]) => [ch, [pkg]])) as Record<
    Channel,
    string[]
  >;

/** Runs loadProviders with in-memory modules instead of real packages. */
function load(
  modules: Record<string, unknown>,
  byChannel: Record<Channel, string>,
  config: Record<string, unknown> = {},
) {
  return loadProviders(
    lists(byChannel),
    (pkg) => config[pkg],
    () => context,
    async (pkg) => {
      if (!(pkg in modules)) throw new Error(`Cannot find package '${pkg}'`);
      return modules[pkg];
    },
  );
}

type Asserts = Pick<typeof t, 'ok' | 'equal' | 'match' | 'type'>;

/** Asserts fn throws a PluginLoadError whose message names the package and matches `field`. */
async function refuses(
  t: Asserts,
  fn: () => unknown,
  pkg: string,
  field: RegExp,
  what: string,
): Promise<void> {
  let err: unknown;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  t.type(err, PluginLoadError, `${what}: refused with a PluginLoadError`);
  t.equal(
    (err as PluginLoadError | undefined)?.code,
    'ENS_ERR_PLUGIN',
    `${what}: code ENS_ERR_PLUGIN`,
  );
  const message = (err as Error | undefined)?.message ?? '';
  t.ok(message.includes(pkg), `${what}: message names the plugin (${message})`);
  t.match(message, field, `${what}: message names the field`);
}

t.test('checkPlugin refuses a plugin and names the plugin and the bad field', async (t) => {
  const pkg = 'ens-plugin-acme';
  await refuses(t, () => checkPlugin(pkg, {}), pkg, /default export/, 'no default export');
  await refuses(
    t,
    () => checkPlugin(pkg, { default: 'sms' }),
    pkg,
    /default export/,
    'a default export that is not an object',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ name: 'Acme SMS' })),
    pkg,
    /: name /,
    'a name with capitals and spaces',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ name: undefined })),
    pkg,
    /: name /,
    'a missing name',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ channels: undefined })),
    pkg,
    /: channels /,
    'missing channels',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ channels: [] })),
    pkg,
    /: channels /,
    'an empty channel list',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ channels: ['sms', 'fax'] })),
    pkg,
    /: channels /,
    'an unknown channel',
  );
  const sdkVersion = new RegExp(
    `: sdk range "\\^2\\.0\\.0" does not include .*${SDK_VERSION.replaceAll('.', '\\.')}`,
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ sdk: '^2.0.0' })),
    pkg,
    sdkVersion,
    `an sdk range that excludes ${SDK_VERSION}`,
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ sdk: 'whenever' })),
    pkg,
    /: sdk /,
    'an sdk value that is not a range',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ sdk: undefined })),
    pkg,
    /: sdk /,
    'a missing sdk range',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ configSchema: undefined })),
    pkg,
    /: configSchema /,
    'a missing configSchema',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ create: undefined })),
    pkg,
    /: create /,
    'a missing create',
  );
  await refuses(
    t,
    () => checkPlugin(pkg, goodPlugin({ create: 'yes' })),
    pkg,
    /: create /,
    'a create that is not a function',
  );
});

t.test('checkPlugin accepts a well-formed plugin', async (t) => {
  const p = checkPlugin('ens-plugin-acme', goodPlugin({ sdk: '>=1.0.0 <2' }));
  t.equal(p.name, 'acme-sms');
});

t.test(
  'loadProviders refuses configuration that fails the plugin configSchema, naming the field',
  async (t) => {
    const pkg = 'ens-plugin-acme';
    await refuses(
      t,
      () => load({ [pkg]: goodPlugin() }, allTo(pkg), {}),
      pkg,
      /config .*apiKey/,
      'a missing required field',
    );
    await refuses(
      t,
      () => load({ [pkg]: goodPlugin() }, allTo(pkg), { [pkg]: { apiKey: 'k', region: 7 } }),
      pkg,
      /config \/region/,
      'a field of the wrong type',
    );
  },
);

t.test('the sandbox refuses a misspelt or out-of-range setting, naming it', async (t) => {
  const sandbox = await import('@ens/plugin-sandbox');
  const pkg = '@ens/plugin-sandbox';
  await refuses(
    t,
    () => load({ [pkg]: sandbox }, allTo(pkg), { [pkg]: { handsetDelay: 100 } }),
    pkg,
    /config \/handsetDelay is not a setting/,
    'an unknown key',
  );
  await refuses(
    t,
    () => load({ [pkg]: sandbox }, allTo(pkg), { [pkg]: { handsetDelayMs: -1 } }),
    pkg,
    /config \/handsetDelayMs /,
    'a negative delay',
  );
});

t.test('loadProviders refuses a channel assigned to a plugin that does not list it', async (t) => {
  const smsOnly = 'ens-plugin-sms-only';
  const byChannel: Record<Channel, string> = {
    sms: smsOnly,
    email: smsOnly,
    push: '@ens/plugin-sandbox',
    whatsapp: '@ens/plugin-sandbox',
  };
  const sandbox = await import('@ens/plugin-sandbox');
  await refuses(
    t,
    () =>
      load(
        { [smsOnly]: goodPlugin({ channels: ['sms'] }), '@ens/plugin-sandbox': sandbox },
        byChannel,
        { [smsOnly]: { apiKey: 'k' } },
      ),
    smsOnly,
    /channels does not include email/,
    'email assigned to an sms-only plugin',
  );
});

t.test('loadProviders names a plugin that cannot be imported', async (t) => {
  await refuses(
    t,
    () => load({}, allTo('ens-plugin-missing')),
    'ens-plugin-missing',
    /could not be imported/,
    'an uninstalled package',
  );
});

t.test('loadProviders checks every plugin before creating any provider', async (t) => {
  let created = 0;
  const good = goodPlugin({
    create: () => {
      created++;
      return provider;
    },
  });
  await refuses(
    t,
    () =>
      load(
        { good, bad: goodPlugin({ sdk: '^0.9.0' }) },
        { sms: 'good', email: 'good', push: 'bad', whatsapp: 'good' },
        { good: { apiKey: 'k' } },
      ),
    'bad',
    /: sdk /,
    'one bad plugin among good ones',
  );
  t.equal(created, 0, 'no provider was created, so none is left open');
});

t.test(
  'loadProviders creates one provider per package, shared by its channels, with defaults applied',
  async (t) => {
    const seen: unknown[] = [];
    const mod = goodPlugin({
      create: (config: unknown) => {
        seen.push(config);
        return provider;
      },
    });
    const sandbox = await import('@ens/plugin-sandbox');
    const loaded = await load(
      { acme: mod, '@ens/plugin-sandbox': sandbox },
      { sms: 'acme', email: 'acme', push: '@ens/plugin-sandbox', whatsapp: '@ens/plugin-sandbox' },
      { acme: { apiKey: 'k' } },
    );
    t.equal(seen.length, 1, 'create is called once for the package');
    t.same(seen[0], { apiKey: 'k', region: 'eu' }, 'schema defaults fill in the config');
    t.equal(
      loaded.byChannel.get('sms')?.[0],
      loaded.byChannel.get('email')?.[0],
      'sms and email share one provider',
    );
    t.equal(loaded.byChannel.get('sms')?.[0]?.name, 'acme-sms');
    t.equal(loaded.byChannel.get('push')?.[0]?.name, 'sandbox');
    await loaded.byChannel.get('push')?.[0]?.provider.close?.();
  },
);

t.test('loadProviders closes the providers it made when a later create fails', async (t) => {
  let closed = 0;
  const first = goodPlugin({ create: () => ({ ...provider, close: async () => void closed++ }) });
  const second = goodPlugin({
    name: 'acme-push',
    create: () => {
      throw new Error('no credentials');
    },
  });
  await t.rejects(
    load(
      { first, second },
      { sms: 'first', email: 'first', push: 'second', whatsapp: 'second' },
      { first: { apiKey: 'k' }, second: { apiKey: 'k' } },
    ),
    /no credentials/,
  );
  t.equal(closed, 1, 'the provider created before the failure was closed');
});

t.test('settings for a package that no channel uses are refused, naming it', async (t) => {
  const byChannel = { ...allTo('@ens/plugin-sandbox'), sms: 'ens-plugin-acme' };
  await refuses(
    t,
    () => checkProviderConfig(lists(byChannel), { '@ens/plugin-sandbx': { handsetDelayMs: 1 } }),
    '@ens/plugin-sandbx',
    /ENS_PROVIDER_CONFIG/,
    'a misspelt package',
  );
  t.doesNotThrow(
    () =>
      checkProviderConfig(lists(byChannel), { '@ens/plugin-sandbox': {}, 'ens-plugin-acme': {} }),
    'settings for packages in use are fine',
  );
});
