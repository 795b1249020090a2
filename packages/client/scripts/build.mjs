// Builds @ens/client as it is published: dist/*.js (esbuild, dependencies left to npm) and
// dist/types/*.d.ts (tsc, with the generated src/schema.d.ts beside them), so a project outside
// this repository needs neither tsx nor ENS's `ens-source` condition. `npm pack` runs it
// (prepack). `--out DIR` builds a copy of the package into DIR instead, so a test can pack it
// without touching the dist/ that running tests import. The same steps as the plugin SDK's
// scripts/build.mjs, repeated rather than shared: a workspace reaches nothing outside it by path.
import { build } from 'esbuild';
import { cp, mkdir, readFile, rename, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outFlag = process.argv.indexOf('--out');
const outDir = outFlag === -1 ? pkgDir : path.resolve(process.argv[outFlag + 1] ?? '');
const pkg = JSON.parse(await readFile(path.join(pkgDir, 'package.json'), 'utf8'));

if (outDir !== pkgDir) {
  await mkdir(outDir, { recursive: true });
  for (const f of ['package.json', ...pkg.files.filter((f) => f !== 'dist')])
    await cp(path.join(pkgDir, f), path.join(outDir, f), { recursive: true });
  // tsc resolves the dependencies' types from the copy; npm pack never ships node_modules.
  await symlink(
    path.resolve(pkgDir, '../../node_modules'),
    path.join(outDir, 'node_modules'),
    'dir',
  ).catch((e) => {
    if (e.code !== 'EEXIST') throw e;
  });
}
// Built beside dist/ and swapped in at the end: tests running meanwhile import the old dist/.
const dist = path.join(outDir, `dist.building-${process.pid}`);
await rm(dist, { recursive: true, force: true });

// From the copy's own src/, so the source maps shipped in dist/ point at the src/ shipped beside
// it.
const entries = Object.values(pkg.exports).map((e) => [
  e.default.replace(/^\.\/dist\//, '').replace(/\.js$/, ''),
  path.join(outDir, e['ens-source']),
]);
await build({
  entryPoints: Object.fromEntries(entries),
  outdir: dist,
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

// Declarations mirror src/ under dist/types (the sources already import each other as './x.js').
const program = ts.createProgram(
  entries.map(([, src]) => src),
  {
    declaration: true,
    emitDeclarationOnly: true,
    declarationMap: true,
    outDir: path.join(dist, 'types'),
    rootDir: path.join(outDir, 'src'),
    allowImportingTsExtensions: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
    types: ['node'],
    strict: true,
    skipLibCheck: true,
    // The repository's `npm run typecheck` checks these sources; here they are only described.
    noCheck: true,
  },
);
const relativeTs = /((?:from|import)\s*\(?\s*['"])(\.{1,2}\/[^'"]+)\.ts(['"])/g;
const { diagnostics } = program.emit(undefined, (file, text, bom) =>
  ts.sys.writeFile(
    file,
    file.endsWith('.d.ts') ? text.replace(relativeTs, '$1$2.js$3') : text,
    bom,
  ),
);
// tsc emits nothing for a declaration file: the generated API types are copied as they are.
await cp(path.join(outDir, 'src/schema.d.ts'), path.join(dist, 'types/schema.d.ts'));
const all = [
  ...program.getSyntacticDiagnostics(),
  ...program.getOptionsDiagnostics(),
  ...diagnostics,
];
if (all.length > 0) {
  process.stderr.write(
    ts.formatDiagnosticsWithColorAndContext(all, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => outDir,
      getNewLine: () => '\n',
    }),
  );
  await rm(dist, { recursive: true, force: true });
  process.exit(1);
}
const final = path.join(outDir, 'dist');
const old = `${final}.old-${process.pid}`;
await rename(final, old).catch((e) => {
  if (e.code !== 'ENOENT') throw e;
});
await rename(dist, final);
await rm(old, { recursive: true, force: true });
console.error(
  `built ${pkg.name} ${pkg.version} into ${path.relative(process.cwd(), final) || final}`,
);
