import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';

/** Directories listed in $PATH, in order. */
export function pathDirs(): string[] {
  return (process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== '');
}

export async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first directory in `dirs` that contains every one of `names` as an executable. */
export async function findDirWith(
  dirs: readonly string[],
  names: readonly string[],
): Promise<string | undefined> {
  for (const dir of dirs) {
    const found = await Promise.all(names.map((name) => isExecutable(join(dir, name))));
    if (found.every(Boolean)) return dir;
  }
  return undefined;
}
