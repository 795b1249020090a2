import { ConfigError, createLogger, MASTER_KEY_MISMATCH, migrate, openRuntime, type Config } from '@ens/core';
import { resolveEngines } from '../engines.ts';
import { removeEnginesFile, writeEnginesFile } from '../engines-file.ts';
import { startRoles, type Role } from '../roles.ts';

/**
 * `ens serve`: starts engines when none are configured, applies migrations, runs the chosen roles,
 * and on SIGINT/SIGTERM stops them (intake first, engines last). A second signal exits at once.
 */
export async function serve(config: Config, roles: Role[]): Promise<void> {
  const logger = createLogger(config);
  const engines = await resolveEngines(config, { needNats: true, start: true, log: (line) => logger.debug({ engine: line }, 'engine') });
  const rt = await openRuntime(config, { databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl! }, logger).catch(async (e: unknown) => {
    await engines.stop();
    throw e;
  });
  if (engines.owned) await writeEnginesFile(config.dataDir, { pid: process.pid, databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl! });
  let stopRoles: () => Promise<void> = async () => {};
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      logger.warn('second signal: exiting now');
      process.exit(130);
    }
    stopping = true;
    logger.info({ signal }, 'stopping');
    void (async () => {
      await stopRoles();
      await rt.close().catch(() => {});
      if (engines.owned) await removeEnginesFile(config.dataDir);
      await engines.stop();
      logger.info('stopped');
      process.exit(0);
    })();
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  const applied = await migrate(rt.db);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  if (!(await rt.clients.masterKeyOpensStoredSecrets())) {
    logger.fatal(MASTER_KEY_MISMATCH);
    await rt.close().catch(() => {});
    await engines.stop();
    throw new ConfigError(MASTER_KEY_MISMATCH);
  }
  const running = await startRoles(rt, roles, { port: config.port, host: config.host });
  stopRoles = running.stop;
  const shown = config.host.includes(':') ? `[${config.host}]` : config.host;
  logger.info({ roles }, running.api ? `ENS listening on http://${shown}:${config.port} (API docs at /docs)` : 'ENS running');
}
