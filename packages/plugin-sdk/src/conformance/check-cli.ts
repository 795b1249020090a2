import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ConformanceFixture } from './fixture.ts';
import { runConformance } from './run.ts';

/**
 * `ens-plugin-check <package directory>`: loads the package the way ENS would (its "." export),
 * and its "./conformance" fixture when it has one, runs the checks and prints TAP. Exit code 0
 * when every check passed, 1 when one failed, 2 when the package could not be read.
 */

type Exports = string | { [condition: string]: Exports } | null | undefined;

/** Picks the file a Node ESM import would load for one subpath, for the usual conditions. */
function pick(e: Exports, conditions: readonly string[]): string | undefined {
  if (typeof e === 'string') return e;
  if (e === null || e === undefined || typeof e !== 'object') return undefined;
  for (const [k, v] of Object.entries(e)) {
    if (conditions.includes(k)) {
      const f = pick(v, conditions);
      if (f !== undefined) return f;
    }
  }
  return undefined;
}

function entryFor(
  pkg: { exports?: Exports | Record<string, Exports>; main?: string },
  subpath: '.' | './conformance',
  conditions: readonly string[],
): string | undefined {
  const ex = pkg.exports;
  if (ex === undefined) return subpath === '.' ? (pkg.main ?? 'index.js') : undefined;
  const isMap =
    typeof ex === 'object' && ex !== null && Object.keys(ex).some((k) => k.startsWith('.'));
  if (!isMap) return subpath === '.' ? pick(ex as Exports, conditions) : undefined;
  return pick((ex as Record<string, Exports>)[subpath], conditions);
}

export async function main(argv: readonly string[]): Promise<number> {
  const dir = argv[0];
  if (!dir || dir === '--help' || dir === '-h') {
    process.stderr.write('usage: ens-plugin-check <plugin package directory>\n');
    return dir ? 0 : 2;
  }
  const root = path.resolve(dir);
  let pkg: { name?: string; exports?: Exports; main?: string };
  try {
    pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'));
  } catch (e) {
    process.stderr.write(
      `ens-plugin-check: cannot read ${path.join(root, 'package.json')}: ${(e as Error).message}\n`,
    );
    return 2;
  }
  // Node's own resolution conditions; 'ens-source' too when the process runs with it (ENS's repo).
  const conditions = [
    ...(process.execArgv.some((a) => a.includes('ens-source')) ? ['ens-source'] : []),
    'import',
    'node',
    'default',
  ];
  const mainFile = entryFor(pkg, '.', conditions);
  if (!mainFile) {
    process.stderr.write(`ens-plugin-check: ${root}/package.json has no "." export to load\n`);
    return 2;
  }
  const name = pkg.name ?? path.basename(root);
  let mod: unknown;
  try {
    mod = await import(pathToFileURL(path.join(root, mainFile)).href);
  } catch (e) {
    process.stderr.write(
      `ens-plugin-check: importing ${name} (${mainFile}) failed: ${(e as Error).message}\n`,
    );
    return 2;
  }
  let fixture: ConformanceFixture | undefined;
  const fixtureFile = entryFor(pkg, './conformance', conditions);
  if (fixtureFile) {
    try {
      fixture = (
        (await import(pathToFileURL(path.join(root, fixtureFile)).href)) as {
          default: ConformanceFixture;
        }
      ).default;
    } catch (e) {
      process.stderr.write(
        `ens-plugin-check: importing the ./conformance fixture (${fixtureFile}) failed: ${(e as Error).message}\n`,
      );
      return 2;
    }
  }

  const results = await runConformance(name, mod, fixture);
  const out: string[] = [
    'TAP version 14',
    `# ${name}${fixture ? '' : ' (no ./conformance fixture: shape checks only)'}`,
  ];
  results.forEach((r, i) => {
    if (r.skipped) out.push(`ok ${i + 1} - ${r.name} # SKIP ${r.detail ?? ''}`);
    else if (r.ok) out.push(`ok ${i + 1} - ${r.name}`);
    else
      out.push(
        `not ok ${i + 1} - ${r.name}`,
        '  ---',
        `  detail: ${JSON.stringify(r.detail ?? '')}`,
        '  ...',
      );
  });
  const failed = results.filter((r) => !r.ok).length;
  out.push(`1..${results.length}`, `# ${results.length - failed} passed, ${failed} failed`);
  process.stdout.write(`${out.join('\n')}\n`);
  return failed === 0 ? 0 : 1;
}
