import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { Type } from 'typebox';
import { definePlugin, permanentError, SDK_VERSION, type ProviderPlugin } from '@ens/plugin-sdk';
import {
  runConformance,
  type ConformanceFixture,
  type CheckResult,
} from '@ens/plugin-sdk/conformance';

/**
 * The conformance kit must pass a good plugin and fail a bad one with a reason an author can act
 * on; otherwise a green `ens-plugin-check` would mean nothing.
 */

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const cli = path.join(root, 'packages/plugin-sdk/bin/ens-plugin-check.mjs');

t.test(
  'ens-plugin-check passes the worked example from the docs, over a real HTTP fake',
  async (t) => {
    const { stdout } = await run(process.execPath, [
      cli,
      path.join(root, 'examples/acme-sms-plugin'),
    ]);
    t.match(stdout, /^TAP version 14/);
    t.match(stdout, /ok \d+ - a refusal is a permanent error carrying the provider's reason/);
    t.match(stdout, /ok \d+ - forged webhook 1 \(POST \/status\) is refused/);
    // 18 checks, and 2 of SDK 1.3 the example skips (recipient refusals, reports about recipients).
    t.match(stdout, /# 20 passed, 0 failed/);
    t.notMatch(stdout, /^not ok/m);
  },
);

t.test('ens-plugin-check passes every bundled plugin, built as it is published', async (t) => {
  const { readdir } = await import('node:fs/promises');
  const plugins = await readdir(path.join(root, 'plugins'));
  t.ok(plugins.length >= 8, `bundled plugins: ${plugins.join(', ')}`);
  await Promise.all(
    plugins.map(async (name) => {
      const { stdout } = await run(process.execPath, [cli, path.join(root, 'plugins', name)], {
        timeout: 60_000,
      }).catch((e: { stdout: string }) => e);
      t.match(
        stdout,
        / 0 failed$/m,
        `${name}: ${stdout.match(/# \d+ passed, \d+ failed/)?.[0] ?? stdout.slice(-300)}`,
      );
      t.notMatch(
        stdout,
        /no \.\/conformance fixture/,
        `${name} ships a fixture, so its behaviour was checked`,
      );
    }),
  );
});

t.test('ens-plugin-check says what it cannot read, with exit code 2', async (t) => {
  const err = await run(process.execPath, [
    cli,
    path.join(root, 'test/plugins/no-such-plugin'),
  ]).catch((e: { code: number; stderr: string }) => e);
  t.equal((err as { code: number }).code, 2);
  t.match((err as { stderr: string }).stderr, /cannot read .*no-such-plugin\/package\.json/);
});

const message = {
  deliveryId: 'd',
  attempt: 1,
  channel: 'sms' as const,
  recipient: '+15550100',
  tenant: 't',
  tenantSettings: {},
  eventType: 'e',
  reference: null,
  content: { body: 'x' },
};
const fixture = (over: object = {}): ConformanceFixture => ({
  async start() {
    return {
      config: { key: 'k' },
      sends: { accepted: message, permanent: { ...message, recipient: '+15550000' } },
      webhooks: (id: string) => ({
        genuine: [
          {
            method: 'POST' as const,
            path: '/status',
            headers: { 'x-sig': 'good' },
            body: id,
            report: { status: 'delivered' as const },
          },
        ],
        forged: [
          { method: 'POST' as const, path: '/status', headers: { 'x-sig': 'forged' }, body: id },
        ],
      }),
      async stop() {},
      ...over,
    };
  },
});

/** A plugin that does everything right; each case below breaks one thing. */
function plugin(
  over: { strictSchema?: boolean; plainErrors?: boolean; trustsForgeries?: boolean } = {},
): { default: ProviderPlugin } {
  return {
    default: definePlugin<{ key: string }>({
      name: 'kit-probe',
      channels: ['sms'],
      sdk: '^1.0.0',
      configSchema: Type.Object(
        { key: Type.String() },
        { additionalProperties: over.strictSchema === false },
      ),
      create(_config, ctx) {
        return {
          async send(m) {
            if (m.recipient.endsWith('0000'))
              throw over.plainErrors
                ? new Error('invalid number')
                : permanentError('probe: invalid number');
            return { providerMessageId: 'probe-1' };
          },
          routes: [
            {
              method: 'POST',
              path: '/status',
              async handler(req) {
                if (req.headers['x-sig'] !== 'good' && !over.trustsForgeries)
                  return { status: 403 };
                await ctx.reportStatus({
                  providerMessageId: req.rawBody.toString(),
                  status: 'delivered',
                  at: new Date(),
                });
                return { status: 200 };
              },
            },
          ],
        };
      },
    }) as ProviderPlugin,
  };
}

const failed = (results: CheckResult[]) => results.filter((r) => !r.ok);

t.test('the kit passes a plugin that does everything right', async (t) => {
  const results = await runConformance('kit-probe', plugin(), fixture());
  t.same(failed(results), []);
  t.ok(results.some((r) => /genuine webhook 1/.test(r.name) && r.ok));
});

t.test('the kit fails each broken plugin, naming what to fix', async (t) => {
  const cases: [string, ReturnType<typeof plugin>, RegExp, RegExp][] = [
    [
      'a lenient schema',
      plugin({ strictSchema: false }),
      /closed object/,
      /additionalProperties: false/,
    ],
    [
      'an unclassified error',
      plugin({ plainErrors: true }),
      /permanent error/,
      /unclassified Error: invalid number/,
    ],
    [
      'a webhook that trusts forgeries',
      plugin({ trustsForgeries: true }),
      /forged webhook 1/,
      /answered 200/,
    ],
  ];
  for (const [what, mod, check, detail] of cases) {
    const bad = failed(await runConformance('kit-probe', mod, fixture()));
    t.equal(
      bad.length,
      what === 'a lenient schema' ? 2 : 1,
      `${what}: its checks fail, and only those`,
    );
    t.match(bad[0]?.name, check, what);
    t.match(bad[0]?.detail, detail, what);
  }
  const shape = failed(
    await runConformance('kit-probe', { default: { ...plugin().default, sdk: '^2.0.0' } }),
  );
  t.match(
    shape[0]?.detail,
    `sdk range "^2.0.0" does not include this ENS's plugin SDK ${SDK_VERSION}`,
  );
});
