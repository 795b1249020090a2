import type { FastifyInstance } from 'fastify';
import type { Runtime } from '@ens/core';
import { buildApi, buildHealthServer, webhookRoutes } from '@ens/service-api';
import { startCallbacks } from '@ens/service-callbacks';
import { startFeed } from '@ens/service-feed';
import { opsConsole, startAlertEvaluator } from '@ens/service-ops';
import {
  closeProviders,
  loadConfiguredProviders,
  startWorker,
  type LoadedProviders,
} from '@ens/service-worker';

/**
 * `inbound` (the SMTP listener for bounces, complaints and unsubscribes by mail) runs only where
 * ENS_RETURN_PATH_DOMAIN is set: without it no mail is sent with a return path to come back, so
 * `ens serve` with every role, or a process given `--roles inbound`, leaves it idle and says so.
 */
export const ROLES = ['api', 'worker', 'callbacks', 'feed', 'inbound'] as const;
export type Role = (typeof ROLES)[number];

export interface RunningRoles {
  /** The API server when the api role runs, already listening. */
  api: FastifyInstance | null;
  /**
   * Stops the roles in reverse start order: intake first, so nothing new arrives while work drains.
   */
  stop(): Promise<void>;
}

export function parseRoles(text: string | undefined): Role[] {
  if (text === undefined) return [...ROLES];
  const roles = text
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  const bad = roles.find((r) => !(ROLES as readonly string[]).includes(r));
  if (bad !== undefined || roles.length === 0)
    throw new Error(
      `--roles takes a comma-separated list of ${ROLES.join(', ')}${bad ? `; "${bad}" is not one` : ''}`,
    );
  return [...new Set(roles)] as Role[];
}

/** Starts the chosen roles on an open runtime; the API listens on `listen`. */
export async function startRoles(
  rt: Runtime,
  roles: readonly Role[],
  listen: { port: number; host: string; healthPort?: number },
): Promise<RunningRoles> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const s of stops.reverse())
      await s().catch((err: unknown) => rt.logger.error({ err }, 'stop failed'));
  };
  let api: FastifyInstance | null = null;
  try {
    if (roles.includes('feed')) {
      const f = await startFeed(rt);
      stops.push(() => f.stop());
    }
    if (roles.includes('callbacks')) {
      const c = await startCallbacks(rt);
      stops.push(() => c.stop());
    }
    let providers: LoadedProviders | undefined;
    if (roles.includes('worker')) {
      const w = await startWorker(rt);
      stops.push(() => w.stop());
      providers = w.providers;
    }
    if (roles.includes('inbound')) {
      if (rt.config.consent.returnPathDomain) {
        // Imported here: its SMTP server and MIME parser cost every other process about 0.1 s of
        // CPU at start, and the role runs only where ENS_RETURN_PATH_DOMAIN is set.
        const { startInbound } = await import('@ens/service-inbound');
        const inbound = await startInbound(rt);
        stops.push(() => inbound.stop());
      } else {
        const alone = roles.length === 1;
        rt.logger[alone ? 'warn' : 'debug'](
          'inbound role not started: ENS_RETURN_PATH_DOMAIN is unset, so no mail carries a ' +
            'return path to receive bounces at',
        );
      }
    }
    if (roles.includes('api')) {
      // Provider webhooks are served by the API. Without a worker in this process the API makes
      // its own provider instances, only to receive their webhooks; status reports go to the
      // same store either way.
      if (!providers) {
        const own = await loadConfiguredProviders(rt);
        stops.push(() => closeProviders(own));
        providers = own;
      }
      // The operations console has its own scope (outside /v2's token auth), with its own cookies,
      // sessions and CSRF; with ENS_OPS_ISSUER unset its pages say it is not configured (404).
      const opsRoutes = async (app: FastifyInstance) => {
        await app.register(opsConsole(rt), { prefix: '/ops' });
      };
      // A process session, as the claiming roles keep: an api process killed between a handoff's
      // commit and its wake-ups' publish is then found dead within ENS_SESSION_TIMEOUT, and the
      // due work it may have left unwoken is woken (store/process-sessions.ts), not left to the
      // sweeper's grace (test/fault/api-kill9-wakeups.test.ts). Ended after the API has closed.
      await rt.session.start();
      stops.push(() => rt.session.stop(rt.reaper));
      const app = await buildApi(rt, { plugins: [opsRoutes, webhookRoutes(providers.all)] });
      // Closed from here on, listening or not: its close hooks release what it holds (the client
      // directory's LISTEN connection), without which the pool could never end after a failed
      // listen.
      stops.push(() => app.close());
      await app.listen(listen);
      api = app;
      // Console alert rules are evaluated where the console is served. Several API processes may
      // run it: one evaluates per round (advisory lock), and each firing notifies once.
      const alerts = startAlertEvaluator(rt);
      stops.push(() => alerts.stop());
    } else if (listen.healthPort) {
      const health = await buildHealthServer(rt);
      stops.push(() => health.close());
      await health.listen({ port: listen.healthPort, host: listen.host });
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { api, stop };
}
