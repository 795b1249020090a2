import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';
import { root } from './ens-process.ts';
import type { Teardown } from './service.ts';

export type EnsRun = (
  args: string[],
  env: Record<string, string>,
) => Promise<{ code: number | null; stdout: string; stderr: string }>;

/**
 * The `ens` command bundled from the current source with esbuild, for tests that run it many
 * times. Under tsx every start costs about 2 s of CPU (each of the ~1,000 modules that
 * @ens/core pulls in goes through its loader); the bundle, one file with its dependencies, starts
 * in about 0.2 s. Same source and the same esbuild that `npm run build` uses, with the workspace
 * packages' src/ inlined so a stale dist/ can never be what is tested. Built once per test file
 * (about a second), removed at teardown.
 */
export async function bundleEns(t: Teardown): Promise<EnsRun> {
  // Inside the repository, so anything the bundle still resolves at run time is found.
  const cache = path.join(root, 'node_modules', '.cache');
  await mkdir(cache, { recursive: true });
  const dir = await mkdtemp(path.join(cache, 'ens-cli-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await build({
    entryPoints: { ens: path.join(root, 'apps/ens/src/main.ts') },
    outdir: dir,
    outExtension: { '.js': '.mjs' },
    // Chunks keep the CLI's lazy command imports lazy: `ens clients …` does not load Fastify.
    splitting: true,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['ens-source'],
    // Dependencies are inlined too: loading one file is what makes the start cheap. pg-native is
    // pg's optional native driver, never installed; `require` serves the CommonJS dependencies.
    external: ['pg-native'],
    banner: {
      js:
        "import { createRequire as ensCreateRequire } from 'node:module'; const require = " +
        'ensCreateRequire(import.meta.url);',
    },
    logLevel: 'warning',
  });
  const outfile = path.join(dir, 'ens.mjs');
  // migrate() reads the SQL files beside the code that runs it (every chunk is in `dir`).
  for (const sql of ['migrations', 'functions'])
    await cp(path.join(root, 'packages/core/src/db', sql), path.join(dir, sql), {
      recursive: true,
    });

  return (args, env) =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [outfile, ...args], {
        cwd: root,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
}

/**
 * Runs `ens …` with `env`; `json` is stdout parsed when it is one JSON document, else undefined.
 */
export function ensJson(run: EnsRun, env: Record<string, string>) {
  return async (
    args: string[],
  ): Promise<{ code: number | null; stdout: string; stderr: string; json: any }> => {
    const r = await run(args, env);
    let json: any;
    try {
      json = JSON.parse(r.stdout);
    } catch {
      json = undefined;
    }
    return { ...r, json };
  };
}
