import { chmod, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { findPostgresBinaries, startPostgres } from '@ens/local-engines';
import { scratchRoot } from './scratch-root.ts';

async function hasPgVersion(dataDir: string): Promise<boolean> {
  try {
    return (await stat(join(dataDir, 'PG_VERSION'))).isFile();
  } catch {
    return false;
  }
}

/**
 * Builds a data directory that has been through initdb and one clean start (so
 * the `ens` database exists). It is staged under a unique name and renamed into
 * place, so concurrent test processes never see a half-built template: the
 * losers of a race simply discard their copy.
 */
async function buildTemplate(root: string): Promise<void> {
  const staging = await mkdtemp(`${root}.staging-`);
  try {
    // The postgres OS user (when we are root) must be able to reach its data dir.
    await chmod(staging, 0o755);
    const pg = await startPostgres({ dataDir: join(staging, 'data'), fsync: false });
    await pg.stop();
    try {
      await rename(staging, root);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
    }
    if (await hasPgVersion(join(root, 'data'))) return;
    // What is there is broken (say, tmp cleaning removed files): move it aside, then take its
    // place.
    const trash = `${root}.trash-${process.pid}-${Date.now()}`;
    await rename(root, trash).catch(() => {});
    await rm(trash, { recursive: true, force: true });
    await rename(staging, root).catch(() => {});
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

let template: Promise<string> | undefined;

async function locateOrBuild(): Promise<string> {
  const { majorVersion } = await findPostgresBinaries();
  const root = join(
    await scratchRoot(),
    `ens-pg-template-scram-${majorVersion}-${process.getuid?.() ?? 0}`,
  );
  const data = join(root, 'data');
  if (!(await hasPgVersion(data))) await buildTemplate(root);
  if (!(await hasPgVersion(data)))
    throw new Error(`could not create the PostgreSQL template in ${root}`);
  return data;
}

/**
 * A template data directory shared by all test runs on this machine (it lives
 * beside the clusters copied from it, since the copy has to be fast), keyed by
 * PostgreSQL major version (data directories do not cross versions) and by uid
 * (another user's template is unreadable to us).
 */
export function postgresTemplate(): Promise<string> {
  if (!template) {
    template = locateOrBuild();
    // A failure is not cached: the next test file gets a fresh attempt.
    template.catch(() => {
      template = undefined;
    });
  }
  return template;
}
