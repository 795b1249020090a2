import { execFile } from 'node:child_process';
import { access, chmod, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startNats, startPostgres, type NatsHandle, type PostgresHandle } from '@ens/local-engines';
import { postgresTemplate } from './postgres-template.ts';
import { scratchRoot } from './scratch-root.ts';

const execFileAsync = promisify(execFile);

export interface TestEngines {
  databaseUrl: string;
  natsUrl: string;
  /** Scratch directory holding both engines' data; removed by stop(). */
  dir: string;
  postgres: PostgresHandle;
  nats: NatsHandle;
  /** Stops both engines and removes `dir`; safe to call more than once. */
  stop(): Promise<void>;
}

/** Set ENS_ENGINE_LOGS=1 to see engine output when a test misbehaves. */
function logger(prefix: string): ((line: string) => void) | undefined {
  if (!process.env.ENS_ENGINE_LOGS) return undefined;
  return (line) => process.stderr.write(`[${prefix}] ${line}\n`);
}

async function startPostgresFromTemplate(dataDir: string): Promise<PostgresHandle> {
  // Copying an initialised cluster takes tens of milliseconds; initdb takes seconds.
  await execFileAsync('cp', ['-a', await postgresTemplate(), dataDir]);
  const onLog = logger('postgres');
  return startPostgres({ dataDir, fsync: false, ...(onLog ? { onLog } : {}) });
}

/**
 * A server that a fault test killed and never restarted leaves its dynamic shared
 * memory in /dev/shm; only a start on the same data dir reclaims it, and the data
 * dir is about to be deleted. So it is started once more before the final stop.
 * (A clean shutdown removes postmaster.pid; a killed server leaves it behind.)
 */
async function stopPostgresCleanly(postgres: PostgresHandle): Promise<void> {
  const killed =
    postgres.pid === undefined &&
    (await access(join(postgres.dataDir, 'postmaster.pid')).then(
      () => true,
      () => false,
    ));
  if (killed) await postgres.start().catch(() => {});
  await postgres.stop();
}

/**
 * Starts a private PostgreSQL and NATS (JetStream) on free ports for one test
 * file. With `t`, both are stopped and their data removed at teardown.
 */
export async function startTestEngines(t?: {
  teardown(fn: () => unknown): void;
}): Promise<TestEngines> {
  const dir = await mkdtemp(join(await scratchRoot(), 'ens-test-'));
  // When we are root PostgreSQL runs as the postgres user, which must be able to reach its data
  // dir.
  await chmod(dir, 0o755);
  const onNatsLog = logger('nats');
  const [pgResult, natsResult] = await Promise.allSettled([
    startPostgresFromTemplate(join(dir, 'pg')),
    startNats({ storeDir: join(dir, 'nats'), ...(onNatsLog ? { onLog: onNatsLog } : {}) }),
  ]);

  if (pgResult.status === 'rejected' || natsResult.status === 'rejected') {
    await Promise.allSettled([
      pgResult.status === 'fulfilled' ? pgResult.value.stop() : undefined,
      natsResult.status === 'fulfilled' ? natsResult.value.stop() : undefined,
    ]);
    await rm(dir, { recursive: true, force: true });
    throw pgResult.status === 'rejected'
      ? pgResult.reason
      : (natsResult as PromiseRejectedResult).reason;
  }

  const postgres = pgResult.value;
  const nats = natsResult.value;
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      await Promise.allSettled([stopPostgresCleanly(postgres), nats.stop()]);
      await rm(dir, { recursive: true, force: true });
    })();
    return stopping;
  };
  t?.teardown(stop);
  return { databaseUrl: postgres.url, natsUrl: nats.url, dir, postgres, nats, stop };
}
