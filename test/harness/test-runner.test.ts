import { execFileSync } from 'node:child_process';
import module from 'node:module';
import path from 'node:path';
import t from 'tap';
import { SUITE_LOADER } from './ens-process.ts';

/*
 * tap gives each test file the loaders of the plugins it was built with. Out of the box that
 * includes @tapjs/typescript, which loads ts-node and the TypeScript compiler: about 2 s of CPU in
 * every test file, for nothing, since the suite's own loader (package.json "tap" node-arg) runs the
 * sources. package.json disables that plugin and @tapjs/mock (no test mocks a module; its hooks
 * cost every module a second round trip), but tap applies the change to its built test class only
 * when a run starts, after it has chosen the loaders for that run: the first `npm test` after
 * `npm ci`, which is every CI run, paid the cost in all ~170 files. `npm test` runs `tap build`
 * first.
 */
t.test('a test file runs with the suite loader as its only TypeScript loader', async (t) => {
  const argv = process.execArgv.join(' ');
  t.match(argv, /--import=\.\/test\/harness\/loader\/register\.mjs\b/, 'the suite loader');
  t.notMatch(argv, /--import=tsx\b/, 'not tsx as well');
  t.notMatch(argv, /@tapjs\/typescript/, 'no ts-node loader from the disabled typescript plugin');
  t.notMatch(argv, /@tapjs\/mock/, 'no module-mocking hooks');
});

/*
 * typebox is about 680 modules; under module hooks each is a round trip and a compile, about 1.2 s
 * of CPU per process. The loader serves it as bundles whose shared code is one set of modules, so
 * a schema built with one entry point is known to the others.
 */
t.test('typebox loads as one bundle, its entry points sharing their code', async (t) => {
  const resolved = import.meta.resolve('typebox');
  t.match(resolved, /node_modules\/\.cache\/ens-test-loader\/bundles\/typebox-[\d.]+\/index\.mjs$/);
  const { Type, IsSchema } = await import('typebox');
  const type = await import('typebox/type');
  t.equal(type.IsSchema, IsSchema, "typebox/type's functions are typebox's, not copies");
  const { Compile } = await import('typebox/compile');
  const { Value } = await import('typebox/value');
  const schema = Type.Object({ n: Type.Integer({ minimum: 1 }) });
  t.equal(Compile(schema).Check({ n: 2 }), true, 'compiled by typebox/compile');
  t.equal(Value.Check(schema, { n: 0 }), false, 'checked by typebox/value');
});

/*
 * The loader compiles a TypeScript module once per content: a second process reads the output
 * from node_modules/.cache and never starts esbuild (here, an esbuild that cannot start).
 */
t.test('a TypeScript module compiled once is read from the cache after', async (t) => {
  // New content every run, so the first compile is not a cache hit from an earlier run.
  const source = (n: number) =>
    `const n: number = ${n}; // ${process.pid} ${Date.now()}\nconsole.log(n);\n`;
  const dir = t.testdir({ 'answer.ts': source(42), 'other.ts': source(7) });
  const run = (file: string, env: Record<string, string> = {}) => {
    try {
      return execFileSync(process.execPath, [SUITE_LOADER, path.join(dir, file)], {
        env: { ...process.env, NODE_OPTIONS: '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }).toString();
    } catch (err) {
      return `failed: ${(err as { stderr?: Buffer }).stderr?.toString().split('\n')[0]}`;
    }
  };
  // esbuild's own switch for its binary; one that exits at once fails every compile.
  const noEsbuild = { ESBUILD_BINARY_PATH: '/bin/false' };
  t.equal(run('answer.ts'), '42\n', 'the first run compiles');
  t.equal(run('answer.ts', noEsbuild), '42\n', 'the second needs no esbuild');
  t.match(run('other.ts', noEsbuild), /^failed/, 'while new content does');
});

/*
 * On Node 22.1 and later the loader turns on V8's compile cache (register.mjs), in a directory
 * of its own under node_modules/.cache. Node 20 has none.
 */
t.test(
  "V8's compile cache is on where Node has one",
  { skip: 'getCompileCacheDir' in module ? false : `Node ${process.version} has no compile cache` },
  async (t) => {
    const dir = (
      module as { getCompileCacheDir?: () => string | undefined }
    ).getCompileCacheDir?.();
    t.match(dir, /node_modules\/\.cache\/ens-test-loader\/v8\/v\d+\./, 'in the loader cache');
  },
);

/*
 * tap's processinfo hook follows every process a test file starts (it adds itself to their
 * NODE_OPTIONS), and costs each about 0.6 s of CPU at start; test/cli/clients.test.ts used 37 s
 * of CPU with it and 21 s without. The loader takes it out of the children (only the hook: other
 * NODE_OPTIONS stay), since the suite runs without coverage.
 */
t.test('processes a test file starts do not load tap’s processinfo hook', async (t) => {
  t.match(process.env.NODE_OPTIONS, /@tapjs\/processinfo\//, 'tap gave this test file the hook');
  const childsOptions = (env: NodeJS.ProcessEnv) =>
    execFileSync(process.execPath, ['-p', 'process.env.NODE_OPTIONS'], { env }).toString().trim();
  const options = childsOptions(process.env);
  t.notMatch(
    options,
    /processinfo/,
    `not in the child's NODE_OPTIONS (${JSON.stringify(options)})`,
  );
  const kept = childsOptions({
    ...process.env,
    NODE_OPTIONS: `--max-old-space-size=300 ${process.env.NODE_OPTIONS}`,
  });
  t.match(kept, /^"?--max-old-space-size=300"?$/, `other options stay (${kept})`);
});
