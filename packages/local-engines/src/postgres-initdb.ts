import { randomBytes } from 'node:crypto';
import { chown, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { EngineStartError } from './engine-errors.ts';
import { describeExit, spawnEngine } from './engine-process.ts';
import { newPassword, PASSWORD_FILE, readPassword, writeSecretFile } from './postgres-password.ts';
import type { RunAs } from './service-user.ts';

export const SUPERUSER = 'ens';

export interface InitDataDirOptions {
  initdb: string;
  dataDir: string;
  runAs?: RunAs;
  fsync: boolean;
  onLog?: (line: string) => void;
}

export async function isDataDir(dir: string): Promise<boolean> {
  try {
    return (await stat(join(dir, 'PG_VERSION'))).isFile();
  } catch {
    return false;
  }
}

async function listDir(dir: string): Promise<string[] | undefined> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Runs initdb for `dataDir`, with SCRAM-SHA-256 authentication and a generated password for the
 * superuser, kept in the data directory (see postgres-password.ts); resolves with the password.
 * initdb writes PG_VERSION early, so a run killed halfway would leave a directory that looks
 * reusable; building it under a temporary sibling and renaming makes it appear only when complete.
 * A directory that already exists (say, a mounted volume) cannot be renamed onto, so it is
 * initialised in place.
 */
export async function initDataDir(opts: InitDataDirOptions): Promise<string> {
  const { dataDir, runAs } = opts;
  const existing = await listDir(dataDir);
  if (existing && existing.length > 0) {
    throw new EngineStartError(
      'postgres',
      `${dataDir} is not empty but has no PG_VERSION, so it is not a PostgreSQL data directory; refusing to initialise over it`,
    );
  }
  await mkdir(dirname(dataDir), { recursive: true });
  const inPlace = existing !== undefined;
  const target = inPlace
    ? dataDir
    : join(
        dirname(dataDir),
        `.${basename(dataDir)}.initdb-${process.pid}-${randomBytes(4).toString('hex')}`,
      );
  if (!inPlace) await mkdir(target, { mode: 0o700 });
  // initdb runs as the service user and must own the directory it fills.
  if (runAs) await chown(target, runAs.uid, runAs.gid);

  // initdb reads the password from a file; it sits beside the target, not in it (initdb wants an
  // empty directory), readable by the service user only, and goes once initdb has read it.
  const password = newPassword();
  const pwfile = `${target}.pw`;
  await writeSecretFile(pwfile, `${password}\n`, runAs);
  const args = [
    '-D',
    target,
    '-U',
    SUPERUSER,
    '--auth=scram-sha-256',
    `--pwfile=${pwfile}`,
    '--encoding=UTF8',
    '--locale=C',
  ];
  if (!opts.fsync) args.push('--no-sync');
  const proc = await spawnEngine({
    command: opts.initdb,
    args,
    cwd: target,
    ...(runAs ? { runAs } : {}),
    parentDeathSignal: 'SIGTERM',
    ...(opts.onLog ? { onLog: opts.onLog } : {}),
  });
  const status = await proc.exited;
  await rm(pwfile, { force: true });
  if (status.code === 0) await writeSecretFile(join(target, PASSWORD_FILE), `${password}\n`, runAs);
  if (status.code !== 0) {
    if (!inPlace) await rm(target, { recursive: true, force: true });
    const hint = runAs
      ? ` (running as the "${runAs.name}" user: ${dataDir} and its parent directories must be accessible to it)`
      : '';
    throw new EngineStartError(
      'postgres',
      `initdb ${describeExit(status)}${hint}`,
      await proc.recentOutput(),
    );
  }
  if (inPlace) return password;
  try {
    await rename(target, dataDir);
    return password;
  } catch (err) {
    await rm(target, { recursive: true, force: true });
    // Another process initialised the same directory concurrently; its result is as good as ours.
    const theirs = (await isDataDir(dataDir)) ? await readPassword(dataDir) : undefined;
    if (theirs !== undefined) return theirs;
    throw err;
  }
}
