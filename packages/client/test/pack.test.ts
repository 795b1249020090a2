import { execFile } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { startTestService } from '../../../test/harness/service.ts';

/**
 * A caller outside this repository gets @ens/client as an npm package (issue 25: its README never
 * said how): the tarball `npm pack` makes must install into an empty project, carry built JS and
 * type declarations, type-check a caller's TypeScript, and talk to a running ENS.
 */

const run = promisify(execFile);
const clientDir = path.resolve(import.meta.dirname, '..');
const repo = path.resolve(clientDir, '../..');
const tsc = path.join(repo, 'node_modules/.bin/tsc');
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) => !/^npm_/i.test(k) && k !== 'NODE_OPTIONS' && k !== 'INIT_CWD',
  ),
);
const sh = (cmd: string, args: string[], cwd: string, env: Record<string, string> = {}) =>
  run(cmd, args, { cwd, env: { ...cleanEnv, ...env }, timeout: 90_000 });

const svc = await startTestService(t);

t.test('npm pack of the client installs into an empty project and sends through ENS', async (t) => {
  const work = await mkdtemp(path.join(tmpdir(), 'ens-client-pack-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const stage = path.join(work, 'stage');
  await sh(process.execPath, [path.join(clientDir, 'scripts/build.mjs'), '--out', stage], repo);
  const { stdout: packJson } = await sh(
    'npm',
    ['pack', '--ignore-scripts', '--json', '--pack-destination', work],
    stage,
  );
  const [packed] = JSON.parse(packJson) as { filename: string; files: { path: string }[] }[];
  const shipped = packed!.files.map((f) => f.path);
  for (const f of ['package.json', 'README.md', 'dist/index.js', 'dist/types/index.d.ts'])
    t.ok(shipped.includes(f), `the tarball has ${f}`);
  t.ok(shipped.includes('dist/types/schema.d.ts'), 'and the generated API types');
  t.same(
    shipped.filter((f) => f.startsWith('test/') || f.startsWith('scripts/')),
    [],
    'no tests or scripts in the tarball',
  );

  const project = path.join(work, 'shop');
  await mkdir(path.join(project, 'src'), { recursive: true });
  await writeFile(
    path.join(project, 'package.json'),
    JSON.stringify({ name: 'shop', version: '1.0.0', type: 'module', private: true }),
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
      '@types/node@^20.19.0',
    ],
    project,
  );
  t.notOk(
    (await lstat(path.join(project, 'node_modules/@ens/client'))).isSymbolicLink(),
    'installed from the tarball, not linked to the repository',
  );

  // The README's example, typed: a send without an Idempotency-Key would not compile.
  await writeFile(
    path.join(project, 'src/send.ts'),
    `
import { createEnsClient } from '@ens/client';

const ens = createEnsClient({
  baseUrl: process.env.ENS_URL!,
  clientId: process.env.CLIENT_ID!,
  clientSecret: process.env.CLIENT_SECRET!,
});
const tenant = await ens.api.POST('/v2/tenants', { body: { tenant: 'acme', name: 'Acme Ltd' } });
if (tenant.error) throw new Error(tenant.error.detail);
const sent = await ens.send(
  {
    tenant: 'acme',
    event_type: 'order.shipped',
    reference: 'order-1001',
    messages: [{ channel: 'sms', recipients: ['+15551230001'], content: { kind: 'rendered', body: 'Shipped.' } }],
  },
  'order-1001-shipped',
);
if (sent.error) throw new Error(sent.error.detail);
const page = await ens.api.GET('/v2/deliveries', { params: { query: { reference: 'order-1001' } } });
console.log(JSON.stringify({ status: sent.response.status, rows: page.data?.results.length }));
`,
  );
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
  const c = await svc.createClient();
  const { stdout } = await sh(process.execPath, ['dist/send.js'], project, {
    ENS_URL: svc.baseUrl,
    CLIENT_ID: c.clientId,
    CLIENT_SECRET: c.clientSecret,
  });
  t.same(JSON.parse(stdout), { status: 202, rows: 1 }, 'accepted, and in the record at once');
  t.equal(
    JSON.parse(await readFile(path.join(project, 'node_modules/@ens/client/package.json'), 'utf8'))
      .name,
    '@ens/client',
  );
});
