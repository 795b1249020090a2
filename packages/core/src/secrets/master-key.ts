import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Returns the master key: ENS_MASTER_KEY when set (base64 or base64url, at least 32 bytes);
 * otherwise a key generated once into `<dataDir>/master.key` (mode 0600) so a laptop start needs no
 * setup. Losing that file makes stored callback secrets unreadable, which the docs say
 * (docs/guides/security.md).
 */
export async function resolveMasterKey(
  configured: string | undefined,
  dataDir: string,
): Promise<Buffer> {
  if (configured) {
    const key = Buffer.from(
      configured,
      configured.includes('-') || configured.includes('_') ? 'base64url' : 'base64',
    );
    if (key.length < 32)
      throw new Error('ENS_MASTER_KEY must decode to at least 32 bytes (openssl rand -base64 32)');
    return key;
  }
  const file = path.join(dataDir, 'master.key');
  try {
    return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  await mkdir(dataDir, { recursive: true });
  const key = randomBytes(32);
  try {
    await writeFile(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (e) {
    // Another process created it first: use theirs so both agree.
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
    throw e;
  }
}
