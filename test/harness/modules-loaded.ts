import { execFileSync } from 'node:child_process';
import { root, SUITE_LOADER } from './ens-process.ts';

/**
 * How many CommonJS modules whose path contains `pathPart` a new process (running the sources
 * under the suite's loader) has loaded after importing `imports`: for tests that a dependency is
 * loaded only where it is used. ES modules do not show in require's cache, so `pathPart` must name
 * a CommonJS package.
 */
export function commonJsModulesAfter(imports: string[], pathPart: string): number {
  const script = `
    import { createRequire } from 'node:module';
    for (const m of ${JSON.stringify(imports)}) await import(m);
    const cache = createRequire(import.meta.url)('node:module')._cache;
    console.log(Object.keys(cache).filter((k) => k.includes(${JSON.stringify(pathPart)})).length);
  `;
  return Number(
    execFileSync(
      process.execPath,
      ['--conditions=ens-source', SUITE_LOADER, '--input-type=module', '-e', script],
      { cwd: root },
    ).toString(),
  );
}
