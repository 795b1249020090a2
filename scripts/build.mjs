// Builds every workspace package's dist/ with esbuild. Each package is bundled on its own with
// its dependencies left external, so plugins stay separate packages that `import()` resolves by
// name at run time, exactly as a third-party plugin installed from npm would be.
import { build } from 'esbuild';
import { cp, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const groups = ['packages', 'services', 'plugins', 'apps'];
const started = Date.now();
let count = 0;
for (const group of groups) {
  for (const name of await readdir(path.join(root, group))) {
    const dir = path.join(root, group, name);
    const pkg = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8'));
    const entries = Object.values(pkg.exports ?? {}).filter((e) => e?.['ens-source'] && e.default);
    if (entries.length === 0) continue;
    await rm(path.join(dir, 'dist'), { recursive: true, force: true });
    // All of a package's entries in one build with code splitting: modules two entries share (a
    // metrics registry, the loop-health registry) become one chunk, so each exists once per
    // process, as it does when the sources are run directly. A module that reads files beside
    // itself through import.meta.url (core's migrate, the console's assets) must stay out of shared
    // chunks; the tests that run the built `ens` (test/cli) would fail if one moved.
    await build({
      entryPoints: Object.fromEntries(
        entries.map((e) => [
          e.default.replace(/^\.\/dist\//, '').replace(/\.js$/, ''),
          path.join(dir, e['ens-source']),
        ]),
      ),
      outdir: path.join(dir, 'dist'),
      chunkNames: 'chunks/[name]-[hash]',
      splitting: true,
      bundle: true,
      packages: 'external',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      sourcemap: true,
      logLevel: 'warning',
    });
    // The SQL that migrate() reads beside the code that runs it.
    for (const sql of ['migrations', 'functions']) {
      const from = path.join(dir, 'src', 'db', sql);
      if (
        await stat(from).then(
          () => true,
          () => false,
        )
      )
        await cp(from, path.join(dir, 'dist', sql), { recursive: true });
    }
    count++;
  }
}
console.error(`built ${count} packages in ${Date.now() - started} ms`);
