import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isProcessAlive } from '@ens/local-engines';

/*
 * Every `ens serve` on this machine leaves a note in one directory per OS user, so that an
 * operator command started in another shell (with another ENS_DATA_DIR, or none) can tell that it
 * is about to start a second PostgreSQL nobody reads, instead of quietly doing it, and so that
 * `ens token` finds where the API listens (a serve started with PORT=18580) without being told.
 */

export interface RunningServe {
  pid: number;
  dataDir: string;
  /** Whether it started its own engines under its data directory (else it was given URLs). */
  ownEngines: boolean;
  /** Where its API answers, once it listens (absent without the api role). */
  url?: string;
}

const dir = () => path.join(os.tmpdir(), `ens-serve-${process.getuid?.() ?? 'user'}`);
const file = (pid: number) => path.join(dir(), `${pid}.json`);

export async function registerServe(s: RunningServe): Promise<void> {
  await mkdir(dir(), { recursive: true, mode: 0o700 });
  await writeFile(file(s.pid), `${JSON.stringify(s)}\n`, { mode: 0o600 });
}

export async function unregisterServe(pid: number): Promise<void> {
  await rm(file(pid), { force: true });
}

/** The serves running now (notes of processes that are gone are removed on the way). */
export async function runningServes(): Promise<RunningServe[]> {
  const names = await readdir(dir()).catch(() => [] as string[]);
  const out: RunningServe[] = [];
  for (const name of names) {
    const pid = Number(name.replace(/\.json$/, ''));
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (!isProcessAlive(pid)) {
      await rm(path.join(dir(), name), { force: true }).catch(() => {});
      continue;
    }
    try {
      out.push(JSON.parse(await readFile(path.join(dir(), name), 'utf8')) as RunningServe);
    } catch {
      // written at this moment, or not ours: skip
    }
  }
  return out;
}
