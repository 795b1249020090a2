// Builds the SDK as it is published: dist/*.js (esbuild: one module per export, dependencies left
// to npm) and dist/types/*.d.ts (tsc), so a plugin author's project needs neither tsx nor ENS's
// `ens-source` condition. `npm pack` runs it (prepack). `--out DIR` builds a copy of the package
// into DIR instead, so a test can pack it without touching the dist/ that running tests import.
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
// The settings of the repository's scripts/build.mjs, repeated rather than imported: nothing in a
// workspace reaches outside it by path (test/architecture/workspace-imports.test.ts), the SDK above
// all.
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

// Declarations mirror src/ under dist/types. The sources import each other as './x.ts', which tsc
// keeps in .d.ts files; a project without allowImportingTsExtensions needs './x.js', so the
// specifiers are rewritten as the files are written.
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
