import type { FastifyInstance } from 'fastify';
import type { Runtime } from '@ens/core';
import { buildApi, buildHealthServer, webhookRoutes } from '@ens/service-api';
import { startCallbacks } from '@ens/service-callbacks';
import { startFeed } from '@ens/service-feed';
import { opsConsole, startAlertEvaluator } from '@ens/service-ops';
import { closeProviders, loadConfiguredProviders, startWorker, type LoadedProviders } from '@ens/service-worker';

export const ROLES = ['api', 'worker', 'callbacks', 'feed'] as const;
export type Role = (typeof ROLES)[number];

export interface RunningRoles {
  /** The API server when the api role runs, already listening. */
  api: FastifyInstance | null;
  /** Stops the roles in reverse start order: intake first, so nothing new arrives while work drains. */
  stop(): Promise<void>;
}

export function parseRoles(text: string | undefined): Role[] {
  if (text === undefined) return [...ROLES];
  const roles = text.split(',').map((r) => r.trim()).filter(Boolean);
  const bad = roles.find((r) => !(ROLES as readonly string[]).includes(r));
  if (bad !== undefined || roles.length === 0) throw new Error(`--roles takes a comma-separated list of ${ROLES.join(', ')}${bad ? `; "${bad}" is not one` : ''}`);
  return [...new Set(roles)] as Role[];
}

/** Starts the chosen roles on an open runtime; the API listens on `listen`. */
export async function startRoles(rt: Runtime, roles: readonly Role[], listen: { port: number; host: string; healthPort?: number }): Promise<RunningRoles> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch((err: unknown) => rt.logger.error({ err }, 'stop failed'));
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
      const app = await buildApi(rt, { plugins: [opsRoutes, webhookRoutes(providers.all)] });
      // Closed from here on, listening or not: its close hooks release what it holds (the client
      // directory's LISTEN connection), without which the pool could never end after a failed listen.
      stops.push(() => app.close());
      await app.listen(listen);
      api = app;
      // Console alert rules are evaluated where the console is served. Several API
      // processes may run it: one evaluates per round (advisory lock), and each firing notifies once.
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
