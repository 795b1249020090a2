import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Reads the workspaces and every import their files make, so tests can hold the layout to the
 * architecture: apps on top, services (one per role) below, packages and plugins at the bottom.
 */

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Higher floors may import lower ones; `packages` may also import each other (sideways). */
export const FLOORS = { apps: 3, services: 2, packages: 1, plugins: 1 } as const;
export type Group = keyof typeof FLOORS;

export interface Workspace {
  name: string;
  group: Group;
  dir: string;
  declared: Set<string>;
}

export interface ImportSite {
  file: string;
  specifier: string;
  /** Files under a workspace's test/ folder may also use the root's devDependencies. */
  inTest: boolean;
}

export function readJson(file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
}

function depNames(pkg: Record<string, unknown>): string[] {
  return ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'].flatMap(
    (k) => Object.keys((pkg[k] as object | undefined) ?? {}),
  );
}

export function workspaces(): Workspace[] {
  return (Object.keys(FLOORS) as Group[]).flatMap((group) =>
    readdirSync(path.join(root, group)).map((name) => {
      const dir = path.join(root, group, name);
      const pkg = readJson(path.join(dir, 'package.json'));
      return { name: pkg.name as string, group, dir, declared: new Set(depNames(pkg)) };
    }),
  );
}

export const rootDevDependencies = new Set(depNames(readJson(path.join(root, 'package.json'))));

const SOURCE = /\.(ts|mts|mjs|js)$/;

/** Every source file under `dir` (its tests too), without node_modules, dist and declarations. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    if (entry === 'node_modules' || entry === 'dist') return [];
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return SOURCE.test(entry) && !entry.endsWith('.d.ts') ? [full] : [];
  });
}

// Static imports and re-exports (`import … from 'x'`, `export … from 'x'`, `import 'x'`) and
// dynamic `import('x')` with a literal argument.
const IMPORT =
  /(?:^|[\s;])(?:import|export)\s(?:[^'";]*?\sfrom\s*)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

export function importsOf(ws: Workspace): ImportSite[] {
  return sourceFiles(ws.dir).flatMap((file) => {
    const text = readFileSync(file, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    const inTest = path.relative(ws.dir, file).split(path.sep)[0] === 'test';
    return [...text.matchAll(IMPORT)].map((m) => ({
      file: path.relative(root, file),
      specifier: (m[1] ?? m[2])!,
      inTest,
    }));
  });
}

/**
 * `@scope/name/sub` → `@scope/name`; `name/sub` → `name`; null for relative and built-in modules.
 */
export function packageOf(specifier: string): string | null {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:'))
    return null;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
  return builtinModules.includes(name) ? null : name;
}
