import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ConfigError, EnsError, Errors, HttpError, OperatorError } from '@ens/core';
import { EngineMissingError, EngineStartError } from '@ens/local-engines';
import {
  PluginLoadError,
  ProviderError,
  permanentError,
  rateLimitedError,
  transientError,
} from '@ens/plugin-sdk';
import { root } from './workspace-graph.ts';

/**
 * One error tree: every error class ENS defines descends from EnsError (in @ens/plugin-sdk),
 * carries a code, and the ones `ens` reports as one line and exit 2 are OperatorErrors, so the CLI
 * keeps no list of codes of its own.
 */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    if (e === 'node_modules' || e === 'dist' || e === 'test') return [];
    const full = path.join(dir, e);
    return statSync(full).isDirectory() ? sources(full) : /\.ts$/.test(e) ? [full] : [];
  });
}

t.test('no error class outside the tree', async (t) => {
  const stray: string[] = [];
  // @ens/client is published for ENS's callers and imports no workspace (its own test checks that):
  // its errors are the caller's, outside ENS's tree by design.
  const standalone = path.join(root, 'packages', 'client') + path.sep;
  for (const group of ['packages', 'services', 'plugins', 'apps']) {
    for (const file of sources(path.join(root, group))) {
      if (file.startsWith(standalone)) continue;
      for (const m of readFileSync(file, 'utf8').matchAll(/class (\w+) extends Error\b/g)) {
        if (!(m[1] === 'EnsError' && file.endsWith(path.join('plugin-sdk', 'src', 'ens-error.ts'))))
          stray.push(`${path.relative(root, file)}: ${m[1]}`);
      }
    }
  }
  t.same(stray, [], 'only EnsError extends Error directly');
});

t.test('each branch has its code and place', async (t) => {
  const operator = [
    new ConfigError('x'),
    new PluginLoadError('x'),
    new EngineMissingError('nats', 'x', []),
  ];
  for (const e of operator) {
    t.ok(e instanceof OperatorError, `${e.name} is an OperatorError`);
    t.ok(e instanceof EnsError);
  }
  t.same(
    operator.map((e) => e.code),
    ['ENS_ERR_CONFIG', 'ENS_ERR_PLUGIN', 'ENS_ERR_ENGINE_MISSING'],
  );
  t.notOk(
    new EngineStartError('nats', 'x') instanceof OperatorError,
    'an engine that did not start is not a configuration mistake',
  );
  t.same(
    [transientError('x'), permanentError('x'), rateLimitedError('x', 5)].map((e) => e.code),
    ['ENS_ERR_PROVIDER_TRANSIENT', 'ENS_ERR_PROVIDER_PERMANENT', 'ENS_ERR_PROVIDER_RATE_LIMITED'],
  );
  t.ok(
    transientError('x') instanceof ProviderError && transientError('x') instanceof EnsError,
    'provider errors are in the tree',
  );
  const http = Errors.tenantNotFound('acme');
  t.ok(http instanceof HttpError && http instanceof EnsError, 'API errors are in the tree');
  t.same(
    { code: http.code, status: http.status },
    { code: 'ENS_ERR_TENANT_NOT_FOUND', status: 404 },
  );
  t.equal(http.detail, http.message, 'detail is what a person reads');
});
