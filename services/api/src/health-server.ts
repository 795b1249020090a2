import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Runtime } from '@ens/core';
import { httpTimeouts } from './http-timeouts.ts';
import { healthRoutes } from './routes/health.ts';

/**
 * /healthz, /readyz and /metrics alone, for a process that runs no api role (worker, callbacks,
 * feed): an orchestrator's probes and Prometheus reach every process, and /readyz there names a
 * consume loop that stopped.
 */
export async function buildHealthServer(rt: Runtime): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: rt.logger as FastifyBaseLogger,
    ...httpTimeouts(rt.config),
    logController: new LogController({ disableRequestLogging: true }),
  });
  healthRoutes(app, rt);
  return app;
}
