// Module hooks for the test suite and the ENS processes its tests start from source (see
// register.mjs). Two jobs, both for CPU at start-up, since every test file and every ENS process a
// test spawns loads about a thousand modules and the suite starts several hundred such processes:
//
// - TypeScript sources are compiled with esbuild, once per content: the output is kept under
//   node_modules/.cache, so a process that finds it never starts esbuild.
// - typebox ships as about 680 ESM files, and under module hooks each costs a round trip to this
//   thread and a compile: about 1.2 s of CPU per process. It is served as one esbuild bundle per
//   entry point instead, with shared code in common chunks, so `typebox`, `typebox/value` and
//   `typebox/compile` still share one set of modules, as they do unbundled.
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cacheDir, root } from './paths.mjs';

// The repository's TypeScript settings that change what code is emitted (tsconfig.json).
const tsconfigRaw = {
  compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true },
};

let esbuild;
const loadEsbuild = () => (esbuild ??= import('esbuild'));

let esbuildVersion;
async function compilerId() {
  esbuildVersion ??= JSON.parse(
    await readFile(path.join(root, 'node_modules/esbuild/package.json'), 'utf8'),
  ).version;
  return `esbuild ${esbuildVersion} ${JSON.stringify(tsconfigRaw)}`;
}

/** Writes `content` to `file` whole or not at all: parallel test processes share the cache. */
async function writeAtomically(file, content) {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, content);
  await rename(tmp, file);
}

async function compileTypeScript(url) {
  const file = fileURLToPath(url);
  const source = await readFile(file, 'utf8');
  const key = createHash('sha256')
    .update(`${await compilerId()}\0${file}\0${source}`)
    .digest('hex');
  const cached = path.join(cacheDir, 'ts', `${key}.mjs`);
  try {
    return await readFile(cached, 'utf8');
  } catch {}
  const { transform } = await loadEsbuild();
  const { code } = await transform(source, {
    loader: 'ts',
    format: 'esm',
    // As written: Node 20 runs everything the sources use, import attributes included.
    target: 'esnext',
    sourcemap: 'inline',
    sourcefile: file,
    tsconfigRaw,
  });
  // Best effort: a process that may not write there (another user's checkout) still runs.
  await mkdir(path.dirname(cached), { recursive: true })
    .then(() => writeAtomically(cached, code))
    .catch(() => {});
  return code;
}

const bundles = new Map();

/**
 * The directory holding one bundle per export of the package at `pkgDir`, built on first use;
 * null when it cannot be built or kept, and the package is then loaded as published.
 */
function bundled(name, pkgDir) {
  let dir = bundles.get(name);
  if (!dir) {
    dir = (async () => {
      const pkg = JSON.parse(await readFile(path.join(pkgDir, 'package.json'), 'utf8'));
      const out = path.join(cacheDir, 'bundles', `${name}-${pkg.version}`);
      try {
        await readFile(path.join(out, 'complete'));
        return out;
      } catch {}
      const entryPoints = {};
      for (const [subpath, target] of Object.entries(pkg.exports)) {
        const file = typeof target === 'string' ? target : (target.import ?? target.default);
        if (subpath.includes('*') || typeof file !== 'string') continue;
        entryPoints[subpath === '.' ? 'index' : subpath.slice(2)] = path.join(pkgDir, file);
      }
      const tmp = `${out}.${process.pid}.tmp`;
      const { build } = await loadEsbuild();
      await build({
        entryPoints,
        outdir: tmp,
        outExtension: { '.js': '.mjs' },
        bundle: true,
        splitting: true,
        format: 'esm',
        platform: 'node',
        target: 'esnext',
        logLevel: 'warning',
      });
      await writeFile(path.join(tmp, 'complete'), '');
      await mkdir(path.dirname(out), { recursive: true });
      // Another process may have finished the same bundle first; either copy is the same.
      await rename(tmp, out).catch(async () => {
        await rm(tmp, { recursive: true, force: true });
        await readFile(path.join(out, 'complete'));
      });
      return out;
    })().catch(() => null);
    bundles.set(name, dir);
  }
  return dir;
}

/** Packages published as hundreds of small modules, served as bundles. */
const BUNDLED = ['typebox'];

export async function resolve(specifier, context, next) {
  const name = BUNDLED.find((n) => specifier === n || specifier.startsWith(`${n}/`));
  if (name) {
    const entry = await next(name, context);
    const pkgDir = fileURLToPath(entry.url).split(`/node_modules/${name}/`)[0];
    const dir = await bundled(name, path.join(pkgDir, 'node_modules', name));
    if (dir === null) return next(specifier, context);
    const file = specifier === name ? 'index' : specifier.slice(name.length + 1);
    return {
      url: pathToFileURL(path.join(dir, `${file}.mjs`)).href,
      format: 'module',
      shortCircuit: true,
    };
  }
  try {
    return await next(specifier, context);
  } catch (err) {
    // A TypeScript module may name a sibling by its compiled name (`./client.js` for client.ts).
    if (
      err?.code === 'ERR_MODULE_NOT_FOUND' &&
      specifier.startsWith('.') &&
      specifier.endsWith('.js') &&
      context.parentURL?.endsWith('.ts')
    )
      return next(`${specifier.slice(0, -3)}.ts`, context);
    throw err;
  }
}

export async function load(url, context, next) {
  if (url.startsWith('file:') && url.endsWith('.ts'))
    return { format: 'module', source: await compileTypeScript(url), shortCircuit: true };
  return next(url, context);
}
