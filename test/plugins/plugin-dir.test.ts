import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { loadConfig } from '@ens/core';
import { loadProviders, pluginImporter } from '../../services/worker/src/provider-loader.ts';

/**
 * A third-party plugin installed into ENS_PLUGIN_DIR loads, and the repository's package.json and
 * lock file are not touched: found when installing one into a clone edited both (and an image had
 * no way to add one). The plugin is the guide's worked example, installed by npm as a copy into a
 * directory outside the repository, with the SDK as the Dockerfile provides it.
 */

const run = promisify(execFile);
const repo = path.resolve(import.meta.dirname, '../..');
const digest = async (f: string) =>
  createHash('sha256')
    .update(await readFile(path.join(repo, f)))
    .digest('hex');
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) => !/^npm_/i.test(k) && k !== 'NODE_OPTIONS' && k !== 'INIT_CWD',
  ),
);

t.test(
  'a plugin installed into ENS_PLUGIN_DIR loads without touching the repository',
  async (t) => {
    const before = [await digest('package.json'), await digest('package-lock.json')];
    const dir = await mkdtemp(path.join(tmpdir(), 'ens-plugin-dir-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    await writeFile(
      path.join(dir, 'package.json'),
      JSON.stringify({
        private: true,
        dependencies: { '@ens/plugin-sdk': `file:${path.join(repo, 'packages/plugin-sdk')}` },
      }),
    );
    await run(
      'npm',
      [
        'install',
        '--prefix',
        dir,
        '--install-links',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        path.join(repo, 'examples/acme-sms-plugin'),
      ],
      { cwd: dir, env: cleanEnv, timeout: 90_000 },
    );

    const config = loadConfig({ ENS_PLUGIN_DIR: dir, ENS_PROVIDERS: 'sms=ens-plugin-acme-sms' });
    t.equal(config.pluginDir, dir);
    const settings = { apiKey: 'k', from: 'ACME', webhookSecret: 'w'.repeat(16) };
    const load = (importer: (pkg: string) => Promise<unknown>) =>
      loadProviders(
        config.providers,
        (pkg) => (pkg === 'ens-plugin-acme-sms' ? settings : undefined),
        () => ({}) as never,
        importer,
      );

    const loaded = await load(pluginImporter(config.pluginDir));
    t.same(
      loaded.byChannel.get('sms')!.map((p) => [p.pkg, p.name]),
      [['ens-plugin-acme-sms', 'acme-sms']],
      'the plugin in the directory is the sms provider',
    );
    await t.rejects(
      load(pluginImporter(undefined)),
      /provider plugin ens-plugin-acme-sms could not be imported \(is it installed\?\)/,
      'without ENS_PLUGIN_DIR it is not found',
    );
    const sandbox = await loadProviders(
      loadConfig({ ENS_PLUGIN_DIR: dir }).providers,
      () => ({}),
      () => ({}) as never,
      pluginImporter(dir),
    );
    t.equal(sandbox.all[0]?.pkg, '@ens/plugin-sandbox', "ENS's own plugins still load beside it");
    t.same(
      [await digest('package.json'), await digest('package-lock.json')],
      before,
      "the repository's package.json and package-lock.json are unchanged",
    );
  },
);
