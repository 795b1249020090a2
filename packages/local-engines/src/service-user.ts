import { execFile } from 'node:child_process';
import type { Stats } from 'node:fs';
import { lchown, readdir, stat } from 'node:fs/promises';
import path, { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface RunAs {
  name: string;
  uid: number;
  gid: number;
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

const lookups = new Map<string, Promise<RunAs>>();

async function lookupUser(name: string): Promise<RunAs> {
  try {
    const [uid, gid] = await Promise.all([
      execFileAsync('id', ['-u', name]),
      execFileAsync('id', ['-g', name]),
    ]);
    return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    throw new Error(
      `running as root, but there is no "${name}" OS user to run PostgreSQL as (it refuses to run as root): install the "postgresql" package, which creates it, or run as a non-root user`,
    );
  }
}

/**
 * PostgreSQL refuses to run as root, so when we are root it has to run as the
 * `postgres` OS user, or, on a machine without the postgresql package (using the
 * build npm installed), as `nobody`; otherwise it runs as ourselves (undefined).
 */
export function postgresRunAs(): Promise<RunAs | undefined> {
  if (!isRoot()) return Promise.resolve(undefined);
  let lookup = lookups.get('postgres');
  if (!lookup) {
    lookup = lookupUser('postgres').catch(() => lookupUser('nobody'));
    // A failed lookup is retried next time: the user may be created meanwhile.
    lookup.catch(() => lookups.delete('postgres'));
    lookups.set('postgres', lookup);
  }
  return lookup;
}

/**
 * Hands a whole tree to `owner`; skipped when the root already belongs to it, which is the common
 * restart case.
 */
export async function chownTree(root: string, owner: RunAs): Promise<void> {
  const info = await stat(root);
  if (info.uid === owner.uid && info.gid === owner.gid) return;
  await lchown(root, owner.uid, owner.gid);
  const entries = await readdir(root, { recursive: true });
  for (const entry of entries) await lchown(join(root, entry), owner.uid, owner.gid);
}

/**
 * The first directory on the way to `dir` (itself included) that `user` may not enter, with its
 * mode; null when the whole way is open. Judged from owner, group and mode bits (supplementary
 * groups are not looked up), which is what a root shell's mode-700 home or `mktemp -d` breaks.
 */
export async function firstClosedDir(
  dir: string,
  user: RunAs,
): Promise<{ dir: string; mode: number } | null> {
  const parts = path.resolve(dir).split(path.sep).filter(Boolean);
  let at: string = path.sep;
  for (const part of ['', ...parts]) {
    at = part === '' ? at : path.join(at, part);
    let info: Stats;
    try {
      info = await stat(at);
    } catch {
      return null; // not there yet: created later by us, and handed to the user
    }
    const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
    if ((info.mode & bit) === 0) return { dir: at, mode: info.mode & 0o777 };
  }
  return null;
}
