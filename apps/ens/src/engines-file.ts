import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isProcessAlive } from '@ens/local-engines';

/**
 * `ens serve` records the addresses of the engines it started under ENS_DATA_DIR, so that other
 * `ens` commands on the same machine (clients, callbacks) reach the same database instead of
 * starting a second PostgreSQL on a data directory that is in use.
 */
export interface EnginesFile {
  pid: number;
  databaseUrl: string;
  natsUrl: string;
}

const file = (dataDir: string) => path.join(dataDir, 'engines.json');

export async function writeEnginesFile(dataDir: string, e: EnginesFile): Promise<void> {
  await writeFile(file(dataDir), `${JSON.stringify(e)}\n`, { mode: 0o600 });
}

/** The running serve's engines, or null when none is running (a stale file is ignored). */
export async function readEnginesFile(dataDir: string): Promise<EnginesFile | null> {
  try {
    const e = JSON.parse(await readFile(file(dataDir), 'utf8')) as EnginesFile;
    return isProcessAlive(e.pid) ? e : null;
  } catch {
    return null;
  }
}

export async function removeEnginesFile(dataDir: string): Promise<void> {
  await rm(file(dataDir), { force: true });
}
