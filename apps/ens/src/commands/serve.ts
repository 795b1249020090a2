import { ConfigError, createLogger, MASTER_KEY_MISMATCH, migrate, openRuntime, type Config, type Runtime } from '@ens/core';
import { resolveEngines } from '../engines.ts';
import { removeEnginesFile, writeEnginesFile } from '../engines-file.ts';
import { registerServe, unregisterServe } from '../serve-registry.ts';
import { isOperatorError } from '@ens/plugin-sdk';
import { isDatabaseUnavailable, isNatsUnavailable } from '@ens/core/internal';
import { startRoles, type Role } from '../roles.ts';
import { StoppedWaiting, untilReachable } from '../until-reachable.ts';

/**
 * `ens serve`: starts engines when none are configured, applies migrations, runs the chosen roles,
 * and on SIGINT/SIGTERM stops them (intake first, engines last). A second signal exits at once.
 * PostgreSQL or NATS being away at start is waited out (see untilReachable); only a configuration
 * error ends the process.
 */
export async function serve(config: Config, roles: Role[]): Promise<void> {
  const logger = createLogger(config);
  const engines = await resolveEngines(config, { needNats: true, start: true, log: (line) => logger.debug({ engine: line }, 'engine') });
  let rt: Runtime | undefined;
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
      await rt?.close().catch(() => {});
      if (engines.owned) await removeEnginesFile(config.dataDir);
      await unregisterServe(process.pid);
      await engines.stop();
      logger.info('stopped');
      process.exit(0);
    })();
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  const isTransient = (e: unknown) => !isOperatorError(e) && (isDatabaseUnavailable(e) || isNatsUnavailable(e));
  const wait = { logger, isTransient, stopping: () => stopping };
  try {
    rt = await untilReachable('start', () => openRuntime(config, { databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl! }, logger), wait);
    const open = rt;
    if (engines.owned) await writeEnginesFile(config.dataDir, { pid: process.pid, databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl! });
    await registerServe({ pid: process.pid, dataDir: config.dataDir, ownEngines: engines.owned });
    const applied = await untilReachable('migrate', () => migrate(open.db), wait);
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
    if (!(await untilReachable('master key check', () => open.clients.masterKeyOpensStoredSecrets(), wait))) {
      logger.fatal(MASTER_KEY_MISMATCH);
      await open.close().catch(() => {});
      await engines.stop();
      throw new ConfigError(MASTER_KEY_MISMATCH);
    }
    const running = await untilReachable('roles', () => startRoles(open, roles, { port: config.port, host: config.host, healthPort: config.healthPort }), wait);
    stopRoles = running.stop;
    const shown = config.host.includes(':') ? `[${config.host}]` : config.host;
    logger.info({ roles }, running.api ? `ENS listening on http://${shown}:${config.port} (API docs at /docs)` : 'ENS running');
  } catch (e) {
    // A signal during the wait: the shutdown under way stops what was started and exits.
    if (e instanceof StoppedWaiting || stopping) return new Promise(() => {});
    await rt?.close().catch(() => {});
    await engines.stop();
    throw e;
  }
}
