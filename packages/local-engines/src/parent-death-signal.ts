import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { isExecutable, pathDirs } from './find-executable.ts';

let setprivPath: Promise<string | undefined> | undefined;

async function locateSetpriv(): Promise<string | undefined> {
  if (process.platform !== 'linux') return undefined;
  for (const dir of [...pathDirs(), '/usr/bin', '/bin']) {
    const candidate = join(dir, 'setpriv');
    if (!(await isExecutable(candidate))) continue;
    // --pdeathsig appeared in util-linux 2.33; an older setpriv would make every engine fail to start.
    const works = await new Promise<boolean>((resolve) => {
      execFile(candidate, ['--pdeathsig', 'TERM', '--', 'true'], (err) => resolve(!err));
    });
    return works ? candidate : undefined;
  }
  return undefined;
}

/**
 * Wraps a command so the kernel sends it `signal` when this process dies, even by
 * SIGKILL or an unhandled SIGTERM, which no 'exit' handler can cover. setpriv
 * execs the command, so the child's pid stays the engine's pid. Where setpriv is
 * unavailable the command runs unwrapped and only the 'exit' fallback applies.
 * The kernel ties this to the spawning thread, so engines started from a
 * worker_thread stop when that worker ends.
 */
export async function withParentDeathSignal(
  command: string,
  args: readonly string[],
  signal: NodeJS.Signals,
): Promise<{ command: string; args: string[] }> {
  setprivPath ??= locateSetpriv();
  const setpriv = await setprivPath;
  if (!setpriv) return { command, args: [...args] };
  return {
    command: setpriv,
    args: ['--pdeathsig', signal.replace(/^SIG/, ''), '--', command, ...args],
  };
}
