import { execFile } from 'node:child_process';
import { lchown, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
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

/** Hands a whole tree to `owner`; skipped when the root already belongs to it, which is the common restart case. */
export async function chownTree(root: string, owner: RunAs): Promise<void> {
  const info = await stat(root);
  if (info.uid === owner.uid && info.gid === owner.gid) return;
  await lchown(root, owner.uid, owner.gid);
  const entries = await readdir(root, { recursive: true });
  for (const entry of entries) await lchown(join(root, entry), owner.uid, owner.gid);
}
