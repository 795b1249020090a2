import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The repository's root: the harness's processes run there, as a developer's would. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * node's argument for the loader every test file runs with (its hooks.mjs says why that is not
 * tsx: about 2 s less CPU per process started), for the processes a test starts from source.
 */
export const SUITE_LOADER = `--import=${path.join(root, 'test/harness/loader/register.mjs')}`;

/** node's arguments that run `ens` from source, under the suite's loader. */
export const ENS_ARGV = [
  '--conditions=ens-source',
  SUITE_LOADER,
  path.join(root, 'apps/ens/src/main.ts'),
];

export interface EnsProcess {
  child: ChildProcess;
  /** Everything it printed, stdout and stderr. */
  output(): string;
  exited: Promise<number | null>;
  kill9(): Promise<void>;
}

/** Runs the `ens` command from source (as `npx ens` would after a build) with the given env. */
export function spawnEns(
  args: string[],
  env: Record<string, string>,
  opts: { detached?: boolean } = {},
): EnsProcess {
  const child = spawn(process.execPath, [...ENS_ARGV, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own: a test can signal it as a terminal's Ctrl-C does (kill -INT
    // -pgid).
    detached: opts.detached ?? false,
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    output: () => out,
    exited,
    async kill9() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs `ens …` to completion; resolves with exit code, stdout and stderr. */
export function runEns(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...ENS_ARGV, ...args], {
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
