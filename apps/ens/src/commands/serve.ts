import cluster from 'node:cluster';
import {
  ConfigError,
  createLogger,
  MASTER_KEY_MISMATCH,
  migrate,
  openRuntime,
  poolSizes,
  serveClusterMetrics,
  type Config,
  type Runtime,
} from '@ens/core';
import type { Logger } from 'pino';
import { serveClusterRateLimits } from '@ens/service-api';
import { resolveEngines, type Engines } from '../engines.ts';
import { removeEnginesFile, writeEnginesFile } from '../engines-file.ts';
import { registerServe, unregisterServe } from '../serve-registry.ts';
import { urlForListener } from '../server-url.ts';
import { isOperatorError } from '@ens/plugin-sdk';
import {
  isDatabaseUnavailable,
  isNatsUnavailable,
  startTracing,
  TRACING_OFF,
} from '@ens/core/internal';
import {
  ChildFailedAtStart,
  CHILD_READY,
  superviseChildren,
  type Supervisor,
} from '../process-supervisor.ts';
import { startRoles, type Role } from '../roles.ts';
import { StoppedWaiting, untilReachable, type UntilReachableOptions } from '../until-reachable.ts';

/** A second signal sooner than this after the first is the same Ctrl-C, passed on by npm. */
const SIGNAL_ECHO_MS = 1000;

/**
 * `ens serve`: starts engines when none are configured, applies migrations, runs the chosen roles,
 * and on SIGINT/SIGTERM stops them (intake first, engines last). A second signal exits at once.
 * PostgreSQL or NATS being away at start is waited out (see untilReachable); only a configuration
 * error ends the process.
 *
 * With ENS_PROCESSES > 1 this process supervises that many children (process-supervisor.ts), each
 * running the roles; the feed role runs in the first only, because the feed has one writer.
 */
export async function serve(config: Config, roles: Role[]): Promise<void> {
  if (cluster.isWorker) return serveChild(config, roles);
  const count = processCount(config, roles);
  const logger = createLogger(config);
  // A supervisor runs no role, so records no span: only the processes that run roles export.
  const tracing = count === 1 ? await startTracing(config.tracing, logger) : TRACING_OFF;
  const engines = await resolveEngines(config, {
    needNats: true,
    start: true,
    log: (line) => logger.debug({ engine: line }, 'engine'),
  });
  let rt: Runtime | undefined;
  let supervisor: Supervisor | undefined;
  let stopWork: () => Promise<void> = async () => {};
  let stopping = false;
  // A signal while the roles are starting waits for the start to finish, then stops what started
  // (stopping earlier would leave roles that finish starting running on closed pools).
  let startup: Promise<unknown> = Promise.resolve();
  let firstSignalAt = 0;
  const shutdown = (signal: string) => {
    if (stopping) {
      // Ctrl-C in a terminal reaches `npm start` and this process together, and npm passes its
      // copy on: that echo, milliseconds later, is the same request, not an operator's second one.
      if (Date.now() - firstSignalAt < SIGNAL_ECHO_MS) return;
      logger.warn('second signal: exiting now');
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
      process.exit(130);
    }
    stopping = true;
    firstSignalAt = Date.now();
    logger.info({ signal }, 'stopping');
    void (async () => {
      // The supervisor's children are stopped at once, ready or not.
      if (!supervisor) await startup;
      await stopWork();
      await tracing.shutdown();
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

  const wait = waitOptions(logger, () => stopping);
  // Once the API listens, the note says where, for `ens token` in another shell.
  const noteUrl = (url: string) =>
    registerServe({ pid: process.pid, dataDir: config.dataDir, ownEngines: engines.owned, url });
  const start = async (): Promise<void> => {
    try {
      rt = await untilReachable(
        'start',
        () => openRuntime(config, urlsOf(engines), logger, { processes: count }),
        wait,
      );
      const open = rt;
      if (engines.owned)
        await writeEnginesFile(config.dataDir, {
          pid: process.pid,
          databaseUrl: engines.databaseUrl,
          natsUrl: engines.natsUrl!,
        });
      await registerServe({ pid: process.pid, dataDir: config.dataDir, ownEngines: engines.owned });
      const applied = await untilReachable('migrate', () => migrate(open.db), wait);
      if (applied.length > 0) logger.info({ applied }, 'migrations applied');
      if (
        !(await untilReachable(
          'master key check',
          () => open.clients.masterKeyOpensStoredSecrets(),
          wait,
        ))
      ) {
        logger.fatal(MASTER_KEY_MISMATCH);
        throw new ConfigError(MASTER_KEY_MISMATCH);
      }
      const shown = config.host.includes(':') ? `[${config.host}]` : config.host;
      const listening = `ENS listening on http://${shown}:${config.port} (API docs at /docs)`;
      if (count === 1) {
        const running = await untilReachable(
          'roles',
          () =>
            startRoles(open, roles, {
              port: config.port,
              host: config.host,
              healthPort: config.healthPort,
            }),
          wait,
        );
        stopWork = running.stop;
        const address = running.api?.server.address();
        if (address && typeof address === 'object')
          await noteUrl(urlForListener(config.host, address.port));
        logger.info({ roles }, running.api ? listening : 'ENS running');
        return;
      }
      await enoughConnections(open, count);
      // The supervisor needs no runtime of its own: the children open theirs.
      await open.close();
      rt = undefined;
      serveClusterMetrics();
      serveClusterRateLimits();
      const sup = superviseChildren(
        {
          count,
          roles: (i) => (i === 0 ? roles : roles.filter((r) => r !== 'feed')),
          env: {
            DATABASE_URL: engines.databaseUrl,
            NATS_URL: engines.natsUrl!,
            ENS_PROCESSES: String(count),
          },
        },
        logger,
      );
      supervisor = sup;
      stopWork = () => sup.stop();
      await sup.ready;
      // With PORT=0 each child would have its own port: there is no one URL to note.
      if (roles.includes('api') && config.port !== 0)
        await noteUrl(urlForListener(config.host, config.port));
      logger.info(
        { roles, processes: count, pids: sup.pids() },
        roles.includes('api')
          ? `${listening}, ${count} processes`
          : `ENS running, ${count} processes`,
      );
    } catch (e) {
      // A signal during the start: the shutdown under way stops what was started and exits.
      if (e instanceof StoppedWaiting || stopping) return;
      stopping = true;
      await supervisor?.stop();
      await rt?.close().catch(() => {});
      if (engines.owned) await removeEnginesFile(config.dataDir);
      await unregisterServe(process.pid);
      await engines.stop();
      if (e instanceof ChildFailedAtStart) {
        logger.fatal(e.message);
        process.exit(e.exitCode);
      }
      throw e;
    }
  };
  const run = start();
  startup = run.catch(() => {});
  return run;
}

/**
 * How many processes run the roles: ENS_PROCESSES, except that the feed role alone is always one
 * process (the feed has a single writer; more would only wait on its lock).
 */
function processCount(config: Config, roles: readonly Role[]): number {
  return roles.length === 1 && roles[0] === 'feed' ? 1 : config.processes;
}

/**
 * A child of a supervising `ens serve`: runs its roles on the engines it was handed, tells the
 * supervisor when it is ready, and stops on a signal or when the supervisor goes away.
 */
async function serveChild(config: Config, roles: Role[]): Promise<void> {
  const logger = createLogger(config).child({ process: process.pid });
  const tracing = await startTracing(config.tracing, logger);
  let rt: Runtime | undefined;
  let stopRoles: () => Promise<void> = async () => {};
  let stopping = false;
  // As in serve(): a stop during the start waits for it, then stops what started.
  let startup: Promise<unknown> = Promise.resolve();
  const shutdown = (why: string) => {
    // Ctrl-C reaches the supervisor and its children alike, and the supervisor then asks again:
    // repeated requests are the same stop, never a forced exit that would cut work short.
    if (stopping) return;
    stopping = true;
    logger.debug({ why }, 'stopping');
    void (async () => {
      await startup;
      await stopRoles();
      await tracing.shutdown();
      await rt?.close().catch(() => {});
      process.exit(0);
    })();
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // The supervisor gone (killed with -9): no one would restart or stop this process any more.
  process.on('disconnect', () => shutdown('supervisor gone'));
  const wait = waitOptions(logger, () => stopping);
  const start = async (): Promise<void> => {
    try {
      rt = await untilReachable(
        'start',
        () =>
          openRuntime(
            config,
            { databaseUrl: config.databaseUrl!, natsUrl: config.natsUrl! },
            logger,
            { processes: config.processes },
          ),
        wait,
      );
      const open = rt;
      const running = await untilReachable(
        'roles',
        () =>
          startRoles(open, roles, {
            port: config.port,
            host: config.host,
            healthPort: config.healthPort,
          }),
        wait,
      );
      stopRoles = running.stop;
      if (!stopping) process.send?.({ type: CHILD_READY });
    } catch (e) {
      if (e instanceof StoppedWaiting || stopping) return;
      await rt?.close().catch(() => {});
      throw e;
    }
  };
  const run = start();
  startup = run.catch(() => {});
  return run;
}

function urlsOf(engines: Engines): { databaseUrl: string; natsUrl: string } {
  return { databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl! };
}

function waitOptions(logger: Logger, stopping: () => boolean): UntilReachableOptions {
  const isTransient = (e: unknown) =>
    !isOperatorError(e) && (isDatabaseUnavailable(e) || isNatsUnavailable(e));
  return { logger, isTransient, stopping };
}

/**
 * Each process holds its own pools (poolSizes): a PostgreSQL that cannot take them all would fail
 * later, under load, with "too many clients". Said at start instead, with the numbers.
 */
async function enoughConnections(rt: Runtime, processes: number): Promise<void> {
  const per = poolSizes(processes);
  // Pools, plus a few listeners and short-lived connections per process.
  const needed = processes * (per.db + per.leases + per.keyed + 3);
  const r = await rt.db.query<{ max: string; used: string }>(
    "SELECT current_setting('max_connections') AS max, (SELECT count(*) FROM " +
      'pg_stat_activity)::text AS used',
  );
  const max = Number(r.rows[0]!.max);
  const free = max - Number(r.rows[0]!.used);
  if (needed > free) {
    throw new ConfigError(
      `ENS_PROCESSES=${processes}: the processes may open up to ${needed} PostgreSQL connections, and the server has ${free} free of max_connections=${max}; raise max_connections or set ENS_PROCESSES lower`,
    );
  }
}
