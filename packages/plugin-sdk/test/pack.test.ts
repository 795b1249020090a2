import { execFile } from 'node:child_process';
import { cp, lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { SDK_VERSION } from '@ens/plugin-sdk';

/**
 * A plugin author outside this repository gets the SDK as an npm package: the tarball `npm pack`
 * makes must install into an empty project (no workspace, nothing of ENS), carry built JS and
 * type declarations, build a TypeScript plugin, and run `ens-plugin-check` over it.
 */

const run = promisify(execFile);
const sdkDir = path.resolve(import.meta.dirname, '..');
const repo = path.resolve(sdkDir, '../..');
const tsc = path.join(repo, 'node_modules/.bin/tsc');

/** The environment of a shell outside the repository: none of npm's workspace settings leak in. */
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) => !/^npm_/i.test(k) && k !== 'NODE_OPTIONS' && k !== 'INIT_CWD',
  ),
);
const sh = (cmd: string, args: string[], cwd: string) =>
  run(cmd, args, { cwd, env: cleanEnv, timeout: 60_000 });

t.test(
  'the SDK stands alone: it imports and depends on no other workspace, and its version is the ' +
    'contract version',
  async (t) => {
    const pkg = JSON.parse(await readFile(path.join(sdkDir, 'package.json'), 'utf8')) as {
      version: string;
      dependencies: Record<string, string>;
      private?: boolean;
    };
    t.equal(pkg.version, SDK_VERSION, 'package version = SDK_VERSION (README: version policy)');
    t.not(pkg.private, true, 'publishable');
    t.same(
      Object.keys(pkg.dependencies).filter((d) => d.startsWith('@ens/')),
      [],
      'no @ens/* dependency',
    );
    const files = (await readdir(path.join(sdkDir, 'src'), { recursive: true })).filter((f) =>
      f.endsWith('.ts'),
    );
    t.ok(files.length > 5, `sources: ${files.length}`);
    for (const f of files) {
      const text = await readFile(path.join(sdkDir, 'src', f), 'utf8');
      const bad = [...text.matchAll(/(?:from|import\()\s*['"](@ens\/[^'"]+)['"]/g)].map(
        (m) => m[1],
      );
      t.same(bad, [], `src/${f} imports no other workspace`);
    }
  },
);

t.test(
  'npm pack of the SDK installs into an empty project, where a TypeScript plugin builds and ' +
    'ens-plugin-check runs',
  async (t) => {
    const work = await mkdtemp(path.join(tmpdir(), 'ens-sdk-pack-'));
    t.teardown(() => rm(work, { recursive: true, force: true }));

    // The publishable package, built into a copy so the dist/ that running tests import is left
    // alone; then packed as `npm pack` would after its prepack.
    const stage = path.join(work, 'stage');
    await sh(process.execPath, [path.join(sdkDir, 'scripts/build.mjs'), '--out', stage], repo);
    const { stdout: packJson } = await sh(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', work],
      stage,
    );
    const [packed] = JSON.parse(packJson) as { filename: string; files: { path: string }[] }[];
    const shipped = packed!.files.map((f) => f.path);
    for (const f of [
      'package.json',
      'README.md',
      'bin/ens-plugin-check.mjs',
      'dist/index.js',
      'dist/conformance.js',
      'dist/check-cli.js',
      'dist/types/index.d.ts',
      'dist/types/conformance/index.d.ts',
    ]) {
      t.ok(shipped.includes(f), `the tarball has ${f}`);
    }
    t.same(
      shipped.filter((f) => f.startsWith('test/') || f.startsWith('scripts/')),
      [],
      'no tests or build scripts in the tarball',
    );
    t.equal(packed!.filename, `ens-plugin-sdk-${SDK_VERSION}.tgz`);

    // An empty project under the temporary directory: node's resolution cannot climb into the repo.
    const project = path.join(work, 'acme-plugin');
    await mkdir(path.join(project, 'src'), { recursive: true });
    await writeFile(
      path.join(project, 'package.json'),
      JSON.stringify({
        name: 'ens-plugin-acme-probe',
        version: '1.0.0',
        type: 'module',
        exports: { '.': './dist/index.js', './conformance': './dist/conformance.js' },
      }),
    );
    await sh(
      'npm',
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--workspaces=false',
        path.join(work, packed!.filename),
        'typebox@^1.4.3',
        '@types/node@^20.19.0',
      ],
      project,
    );
    const installed = path.join(project, 'node_modules/@ens/plugin-sdk');
    t.notOk(
      (await lstat(installed)).isSymbolicLink(),
      'the SDK is installed from the tarball, not linked to the repository',
    );
    t.equal(
      JSON.parse(await readFile(path.join(installed, 'package.json'), 'utf8')).version,
      SDK_VERSION,
    );
    const map = JSON.parse(await readFile(path.join(installed, 'dist/index.js.map'), 'utf8')) as {
      sources: string[];
    };
    const missing: string[] = [];
    for (const s of map.sources)
      if (
        !(await lstat(path.join(installed, 'dist', s)).then(
          () => true,
          () => false,
        ))
      )
        missing.push(s);
    t.same(
      missing,
      [],
      `the source map's sources ship with the package (${map.sources.join(', ')})`,
    );

    await writeFile(
      path.join(project, 'src/index.ts'),
      `
import { Type, type Static } from 'typebox';
import { definePlugin, permanentError, type OutboundMessage, type SendResult } from '@ens/plugin-sdk';

const Config = Type.Object({ apiKey: Type.String({ minLength: 1 }) }, { additionalProperties: false });

export default definePlugin<Static<typeof Config>>({
  name: 'acme-probe',
  channels: ['sms'],
  sdk: '^1.2.0',
  configSchema: Config,
  create(config) {
    let n = 0;
    return {
      pace: { perSecond: 10 },
      async send(m: OutboundMessage): Promise<SendResult> {
        if (m.recipient.endsWith('0000')) throw permanentError(\`acme-probe: \${m.recipient} is not a mobile number\`);
        return { providerMessageId: \`\${config.apiKey}-\${++n}\` };
      },
    };
  },
});
`,
    );
    await writeFile(
      path.join(project, 'src/conformance.ts'),
      `
import { sampleMessage, type ConformanceFixture } from '@ens/plugin-sdk/conformance';

const fixture: ConformanceFixture = {
  async start() {
    return {
      config: { apiKey: 'k' },
      invalidConfig: { apiKey: '' },
      sends: { accepted: sampleMessage('sms'), permanent: sampleMessage('sms', { recipient: '+15550000000' }) },
      async stop() {},
    };
  },
};
export default fixture;
`,
    );
    // skipLibCheck as most projects have it: checking typebox's own declarations costs ~20 s of
    // CPU.
    await writeFile(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          skipLibCheck: true,
          outDir: 'dist',
          rootDir: 'src',
          types: ['node'],
        },
        include: ['src'],
      }),
    );
    await sh(tsc, ['-p', 'tsconfig.json'], project).catch((e: { stdout: string }) =>
      t.fail(`tsc: ${e.stdout}`),
    );
    t.ok(
      (await readdir(path.join(project, 'dist'))).includes('index.js'),
      'tsc built the plugin against the packed SDK types',
    );

    const { stdout } = await sh('npx', ['--no', 'ens-plugin-check', '.'], project);
    t.match(
      stdout,
      /^TAP version 14\n# ens-plugin-acme-probe\n/,
      'TAP for the package, with its fixture',
    );
    t.match(stdout, /ok \d+ - default export is a plugin ENS can load/);
    t.match(stdout, /ok \d+ - a refusal is a permanent error carrying the provider's reason/);
    t.match(stdout, /# \d+ passed, 0 failed\n$/, 'every check passed (exit 0)');

    // The guide's worked example, copied beside it, passes too against the packed SDK.
    await cp(path.join(repo, 'examples/acme-sms-plugin'), path.join(project, 'acme-example'), {
      recursive: true,
    });
    const { stdout: example } = await sh(
      'npx',
      ['--no', 'ens-plugin-check', './acme-example'],
      project,
    );
    // 20: SDK 1.3 added two checks the example skips (recipient refusals, reports about
    // recipients).
    t.match(
      example,
      /# 20 passed, 0 failed\n$/,
      'the worked example (examples/acme-sms-plugin) passes every check',
    );

    // A broken plugin beside it, sharing the project's node_modules: a plain Error and an open
    // schema.
    const broken = path.join(project, 'broken');
    await mkdir(broken);
    await writeFile(
      path.join(broken, 'package.json'),
      JSON.stringify({
        name: 'ens-plugin-broken',
        type: 'module',
        exports: { '.': './index.js', './conformance': './conformance.js' },
      }),
    );
    await writeFile(
      path.join(broken, 'index.js'),
      `
import { Type } from 'typebox';
import { definePlugin } from '@ens/plugin-sdk';
export default definePlugin({
  name: 'broken', channels: ['sms'], sdk: '^1.0.0',
  configSchema: Type.Object({ apiKey: Type.String() }),
  create: () => ({ async send(m) { if (m.recipient.endsWith('0000')) throw new Error('no such number'); return { providerMessageId: 'b-1' }; } }),
});
`,
    );
    await writeFile(
      path.join(broken, 'conformance.js'),
      `
import { sampleMessage } from '@ens/plugin-sdk/conformance';
export default { async start() { return { config: { apiKey: 'k' }, sends: { accepted: sampleMessage('sms'), permanent: sampleMessage('sms', { recipient: '+15550000000' }) }, async stop() {} }; } };
`,
    );
    const failed = await sh('npx', ['--no', 'ens-plugin-check', './broken'], project).then(
      () => ({ code: 0, stdout: '' }),
      (e: { code: number; stdout: string }) => e,
    );
    t.equal(failed.code, 1, 'exit 1 when a check fails');
    t.match(
      failed.stdout,
      /not ok \d+ - configSchema is a closed object/,
      'the open schema is named',
    );
    t.match(
      failed.stdout,
      /not ok \d+ - a refusal is a permanent error[^\n]*\n[^\n]*\n\s+detail: "threw an unclassified Error: no such number/,
      'the unclassified error is named, with the fix',
    );
    t.match(failed.stdout, /# \d+ passed, [1-9]\d* failed\n$/);
  },
);
