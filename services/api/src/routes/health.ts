import type { FastifyInstance } from 'fastify';
import { metricsRegistry, type Runtime } from '@ens/core';
import { downLoops } from '@ens/core/internal';

async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, rej) => { timer = setTimeout(() => rej(new Error(`no answer within ${ms} ms`)), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * /healthz (the process is up), /readyz (PostgreSQL, NATS and an S3 media store answer, and every
 * consume loop of this process takes work), /metrics (Prometheus).
 */
export function healthRoutes(app: FastifyInstance, rt: Runtime): void {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    const checks: Record<string, string> = {};
    await Promise.all([
      within(2000, rt.db.query('SELECT 1')).then(() => { checks.postgres = 'ok'; }, (e: Error) => { checks.postgres = e.message; }),
      within(2000, rt.nc.flush()).then(() => { checks.nats = 'ok'; }, (e: Error) => { checks.nats = e.message; }),
      ...(rt.media.check ? [within(2000, rt.media.check()).then(() => { checks.media = 'ok'; }, (e: Error) => { checks.media = e.message; })] : []),
    ]);
    // A loop of this process that is not taking work makes it not ready, named, so an operator (or
    // an orchestrator's probe) sees a stopped channel instead of a silent backlog.
    for (const loop of downLoops()) checks[`loop ${loop.name}`] = `not consuming for ${Math.round(loop.sinceMs / 1000)} s: ${loop.reason}`;
    const ready = Object.values(checks).every((v) => v === 'ok');
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
  });
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.header('content-type', metricsRegistry.contentType);
    return metricsRegistry.metrics();
  });
}
