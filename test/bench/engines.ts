import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { startNats, startPostgres, type NatsHandle, type PostgresHandle } from '@ens/local-engines';
import { onCleanup } from './cleanup.ts';
import { progress } from './log.ts';

export interface BenchEngines {
  databaseUrl: string;
  natsUrl: string;
  postgres: PostgresHandle;
  nats: NatsHandle;
  /** e.g. "PostgreSQL 15.10, nats-server 2.10.x" */
  versions: string;
}

/** Set BENCH_ENGINE_LOGS=1 to see engine output. */
function logger(prefix: string): ((line: string) => void) | undefined {
  if (!process.env.BENCH_ENGINE_LOGS) return undefined;
  return (line) => process.stderr.write(`[${prefix}] ${line}\n`);
}

/**
 * One PostgreSQL and one NATS (JetStream) for the whole run, both under `root` (a temp dir on disk,
 * not tmpfs), with fsync ON as in production. The raw baselines and ENS share these same engines.
 */
export async function startEngines(root: string): Promise<BenchEngines> {
  // When we run as root PostgreSQL runs as the postgres user, which must be able to reach its data
  // dir.
  await chmod(root, 0o755);
  await mkdir(join(root, 'nats'), { recursive: true });
  const pgLog = logger('postgres');
  const natsLog = logger('nats');
  const postgres = await startPostgres({
    dataDir: join(root, 'pg'),
    fsync: true,
    ...(pgLog ? { onLog: pgLog } : {}),
  });
  onCleanup('postgres', () => postgres.stop());
  progress(`postgres up at ${postgres.url} (fsync on)`);
  const nats = await startNats({
    storeDir: join(root, 'nats'),
    ...(natsLog ? { onLog: natsLog } : {}),
  });
  onCleanup('nats', () => nats.stop());
  progress(`nats up at ${nats.url}`);

  const c = new pg.Client({ connectionString: postgres.url });
  c.on('error', () => {});
  await c.connect();
  const pgVersion = (await c.query<{ v: string }>(`SELECT current_setting('server_version') AS v`))
    .rows[0]!.v;
  const settings = (
    await c.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'wal_sync_method')`,
    )
  ).rows
    .map((r) => `${r.name}=${r.setting}`)
    .join(' ');
  await c.end();
  const natsVersion = await natsServerVersion(nats.url);
  return {
    databaseUrl: postgres.url,
    natsUrl: nats.url,
    postgres,
    nats,
    versions: `PostgreSQL ${pgVersion} (${settings}), nats-server ${natsVersion}`,
  };
}

async function natsServerVersion(url: string): Promise<string> {
  const { connect } = await import('@nats-io/transport-node');
  const nc = await connect({ servers: url });
  try {
    return nc.info?.version ?? 'unknown';
  } finally {
    await nc.close();
  }
}
