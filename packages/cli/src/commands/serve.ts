import { createLogger, migrate, openRuntime, type Config } from '@ens/core';
import { buildApi } from '@ens/service-api';
import { startCallbacks } from '@ens/service-callbacks';
import { startFeed } from '@ens/service-feed';
import { startWorker } from '@ens/service-worker';
import { resolveEngines } from '../engines.ts';
import { removeEnginesFile, writeEnginesFile } from '../engines-file.ts';

export const ROLES = ['api', 'worker', 'callbacks', 'feed'] as const;
export type Role = (typeof ROLES)[number];

export function parseRoles(text: string | undefined): Role[] {
  if (text === undefined) return [...ROLES];
  const roles = text.split(',').map((r) => r.trim()).filter(Boolean);
  const bad = roles.find((r) => !(ROLES as readonly string[]).includes(r));
  if (bad !== undefined || roles.length === 0) throw new Error(`--roles takes a comma-separated list of ${ROLES.join(', ')}${bad ? `; "${bad}" is not one` : ''}`);
  return [...new Set(roles)] as Role[];
}

/**
 * `ens serve`: starts engines when none are configured, applies migrations, runs the chosen roles,
 * and on SIGINT/SIGTERM stops them in dependency order (intake first, engines last).
 */
export async function serve(config: Config, roles: Role[]): Promise<void> {
  const logger = createLogger(config);
  const engines = await resolveEngines(config, { needNats: true, start: true, log: (line) => logger.debug({ engine: line }, 'engine') });
  const rt = await openRuntime(config, { databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl! }, logger);
  if (engines.owned) await writeEnginesFile(config.dataDir, { pid: process.pid, databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl! });
  const stops: (() => Promise<void>)[] = [];
  let stopping: Promise<void> | null = null;
  const shutdown = (signal: string) => {
    if (stopping) {
      logger.warn('second signal: exiting now');
      process.exit(130);
    }
    logger.info({ signal }, 'stopping');
    stopping = (async () => {
      for (const s of stops.reverse()) await s().catch((err: unknown) => logger.error({ err }, 'stop failed'));
      await rt.close().catch(() => {});
      if (engines.owned) await removeEnginesFile(config.dataDir);
      await engines.stop();
      logger.info('stopped');
    })();
    void stopping.then(() => process.exit(0));
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  const applied = await migrate(rt.db);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  if (roles.includes('feed')) {
    const f = await startFeed(rt);
    stops.push(() => f.stop());
  }
  if (roles.includes('callbacks')) {
    const c = await startCallbacks(rt);
    stops.push(() => c.stop());
  }
  if (roles.includes('worker')) {
    const w = await startWorker(rt);
    stops.push(() => w.stop());
  }
  if (roles.includes('api')) {
    const app = await buildApi(rt);
    await app.listen({ port: config.port, host: config.host });
    stops.push(() => app.close());
    const shown = config.host.includes(':') ? `[${config.host}]` : config.host;
    logger.info({ roles }, `ENS listening on http://${shown}:${config.port} (API docs at /docs)`);
  } else {
    logger.info({ roles }, 'ENS running');
  }
}
