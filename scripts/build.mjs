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
    for (const entry of entries) await build({
      entryPoints: [path.join(dir, entry['ens-source'])],
      outfile: path.join(dir, entry.default),
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
      if (await stat(from).then(() => true, () => false)) await cp(from, path.join(dir, 'dist', sql), { recursive: true });
    }
    count++;
  }
}
console.error(`built ${count} packages in ${Date.now() - started} ms`);
