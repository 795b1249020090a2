import { readdir, readFile, readlink, realpath, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isProcessAlive } from './process-alive.ts';

const STOP_GRACE_MS = 10_000;
const KILL_GRACE_MS = 5_000;

async function readPid(file: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt((await readFile(file, 'utf8')).split('\n', 1)[0] ?? '', 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Exited in the meantime.
  }
}

/**
 * Every PostgreSQL process (postmaster, backends, background workers) chdirs into
 * its data directory, which identifies them without trusting a pid file that may
 * point at a recycled pid. Undefined where there is no Linux-style /proc.
 */
async function postgresProcessesIn(dataDir: string): Promise<number[] | undefined> {
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return undefined;
  }
  if (!entries.includes('self')) return undefined;
  const pids = entries.filter((e) => /^\d+$/.test(e)).map(Number);
  const found: number[] = [];
  await Promise.all(
    pids.map(async (pid) => {
      try {
        if ((await readFile(`/proc/${pid}/comm`, 'utf8')).trim() !== 'postgres') return;
        if ((await readlink(`/proc/${pid}/cwd`)) === dataDir) found.push(pid);
      } catch {
        // Exited while we looked, or not ours to inspect.
      }
    }),
  );
  return found;
}

async function waitUntilGone(dataDir: string, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = (await postgresProcessesIn(dataDir)) ?? [];
    if (left.length === 0 || Date.now() >= deadline) return left;
    await sleep(50);
  }
}

/**
 * Makes `dataDir` startable after an unclean end of a previous run:
 * - a postmaster still serving it (its parent was kill -9'd) gets a fast shutdown;
 * - backends orphaned by a SIGKILLed postmaster would keep the old shared memory
 *   attached, and PostgreSQL refuses to start while they do, so they are killed;
 * - lock files naming a pid now used by an unrelated process would also make it
 *   refuse, so they are removed.
 * A lock file naming a dead pid is left alone: PostgreSQL handles that itself.
 */
export async function clearStalePostmaster(
  dataDir: string,
  log: (line: string) => void = () => {},
): Promise<void> {
  const realDir = await realpath(dataDir);
  const running = await postgresProcessesIn(realDir);
  if (running === undefined) return; // Without /proc we cannot tell ours from a recycled pid; let PostgreSQL decide.

  if (running.length > 0) {
    const postmaster = await readPid(join(realDir, 'postmaster.pid'));
    if (postmaster !== undefined && running.includes(postmaster)) {
      log(`stopping PostgreSQL left running from an earlier run (pid ${postmaster})`);
      signal(postmaster, 'SIGINT');
    } else {
      log(`killing ${running.length} PostgreSQL processes orphaned by an earlier run`);
    }
    const left =
      postmaster !== undefined && running.includes(postmaster)
        ? await waitUntilGone(realDir, STOP_GRACE_MS)
        : running;
    for (const pid of left) signal(pid, 'SIGKILL');
    const stuck = await waitUntilGone(realDir, KILL_GRACE_MS);
    if (stuck.length > 0)
      throw new Error(
        `PostgreSQL processes ${stuck.join(', ')} still use ${dataDir} after SIGKILL`,
      );
  }

  const lockFiles = [
    'postmaster.pid',
    ...(await readdir(realDir)).filter((f) => /^\.s\.PGSQL\.\d+\.lock$/.test(f)),
  ];
  for (const file of lockFiles) {
    const pid = await readPid(join(realDir, file));
    if (pid !== undefined && pid !== process.pid && isProcessAlive(pid)) {
      log(`removing ${file}: pid ${pid} is no longer PostgreSQL`);
      await rm(join(realDir, file), { force: true });
    }
  }
}
