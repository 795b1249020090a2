import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chown, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EngineStartError } from './engine-errors.ts';
import type { RunAs } from './service-user.ts';

/*
 * The self-started PostgreSQL asks every client for a password (SCRAM-SHA-256), on its socket and
 * on 127.0.0.1 alike: another local user of the machine, or a process that can reach loopback,
 * gets nothing from knowing the port. The password is generated at initdb and kept in the data
 * directory, readable by its owner only, where `ens` reads it to build the URL it connects with.
 */

export const PASSWORD_FILE = 'ens.password';

/**
 * What initdb --auth=scram-sha-256 writes, written again when a cluster made with trust is
 * converted.
 */
const SCRAM_HBA = `# Written by ENS: every connection proves the password (SCRAM-SHA-256); see ${PASSWORD_FILE}.
local   all             all                                     scram-sha-256
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
local   replication     all                                     scram-sha-256
host    replication     all             127.0.0.1/32            scram-sha-256
host    replication     all             ::1/128                 scram-sha-256
`;

/** 32 hex characters: 128 bits, and nothing a URL or a shell would need to escape. */
export function newPassword(): string {
  return randomBytes(16).toString('hex');
}

/** Writes a file only its owner (the service user, when we are root) can read. */
export async function writeSecretFile(
  file: string,
  content: string,
  runAs: RunAs | undefined,
): Promise<void> {
  await writeFile(file, content, { mode: 0o600 });
  if (runAs) await chown(file, runAs.uid, runAs.gid);
}

/** The password of the data directory, or undefined for a cluster made before ENS used one. */
export async function readPassword(dataDir: string): Promise<string | undefined> {
  try {
    return (await readFile(join(dataDir, PASSWORD_FILE), 'utf8')).trim() || undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Runs one statement in single-user mode: no server, no connection, no authentication. */
async function singleUser(
  postgres: string,
  dataDir: string,
  sql: string,
  runAs: RunAs | undefined,
): Promise<void> {
  const child = spawn(postgres, ['--single', '-D', dataDir, 'postgres'], {
    cwd: dataDir,
    stdio: ['pipe', 'pipe', 'pipe'],
    ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  child.stdin.end(`${sql}\n`);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  if (code !== 0 || /\bERROR:/.test(output)) {
    throw new EngineStartError(
      'postgres',
      `setting the password in single-user mode failed (exit ${code})`,
      output.split('\n').filter(Boolean).slice(-10).join('\n'),
    );
  }
}

/**
 * Converts a cluster that ENS made with trust authentication: sets a generated password on the
 * `user` role (single-user mode, before the server starts), writes pg_hba.conf for SCRAM, and only
 * then stores the password file. A run cut off half-way leaves no password file, so the next start
 * does it all again with a new password. Returns the password.
 */
export async function convertToPassword(opts: {
  postgres: string;
  dataDir: string;
  user: string;
  runAs?: RunAs;
}): Promise<string> {
  const password = newPassword();
  // password_encryption is scram-sha-256 by default since PostgreSQL 14; said here for older ones.
  await singleUser(
    opts.postgres,
    opts.dataDir,
    `SET password_encryption = 'scram-sha-256'; ALTER ROLE "${opts.user}" PASSWORD '${password}';`,
    opts.runAs,
  );
  const hba = join(opts.dataDir, 'pg_hba.conf');
  await writeSecretFile(`${hba}.new`, SCRAM_HBA, opts.runAs);
  await rename(`${hba}.new`, hba);
  const file = join(opts.dataDir, PASSWORD_FILE);
  await writeSecretFile(`${file}.new`, `${password}\n`, opts.runAs);
  await rename(`${file}.new`, file);
  return password;
}
