import { type FileHandle, open, rm } from 'node:fs/promises';
import { UsageError } from './output.ts';

/**
 * A file for secrets shown once (`--out FILE`): created 0600 whatever the umask, so the client
 * secret is not left world-readable as `> FILE` leaves it, and never over an existing file, whose
 * secrets may be the only copy. It is opened before anything is issued, so a bad path changes
 * nothing; `discard` removes it when the command then fails.
 */
export interface SecretFile {
  write(value: unknown): Promise<void>;
  discard(): Promise<void>;
}

export async function openSecretFile(path: string): Promise<SecretFile> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'wx', 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
      code === 'EEXIST'
        ? `--out ${path}: the file exists (it may hold the only copy of other secrets); name a new file`
        : `--out ${path}: cannot create it (${code ?? (e as Error).message})`,
    );
  }
  // open() applies the umask to the mode; a umask cannot add bits, but a chmod makes 0600 certain.
  await handle.chmod(0o600);
  return {
    async write(value) {
      await handle.writeFile(`${JSON.stringify(value, null, 2)}\n`);
      await handle.close();
    },
    async discard() {
      await handle.close().catch(() => {});
      await rm(path, { force: true });
    },
  };
}
