import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { metricsRegistry, metricsText, type Runtime } from '@ens/core';
import { downLoops } from '@ens/core/internal';
import { ANY_PATH_ERRORS, errorResponses, success } from '../openapi/responses.ts';

const Liveness = Type.Object({ status: Type.Literal('ok') });
const Readiness = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('not ready')]),
  checks: Type.Record(Type.String(), Type.String(), {
    description: '"ok", or why that dependency or consume loop is not',
  }),
});

/** Probes and metrics take no token: an orchestrator and Prometheus reach them as they are. */
const PUBLIC = { tags: ['operations'], security: [] };

/** While not ready, the same failing checks are warned about again after this long. */
const NOT_READY_REMINDER_MS = 60_000;

/**
 * A probe that answers 503 is not a failed request: an orchestrator asks every few seconds, and an
 * error line per probe buried what went wrong under copies of itself. So readiness is logged when
 * it changes: a warning naming the checks that fail when they change (again every minute while
 * they last), and a line when the process is ready again.
 */
function readinessLog(
  logger: Runtime['logger'],
): (checks: Record<string, string>, ready: boolean) => void {
  let failing = '';
  let warnedAt = 0;
  return (checks, ready) => {
    const now = Date.now();
    if (ready) {
      if (failing) logger.info('ready again');
      failing = '';
      return;
    }
    const names = Object.keys(checks)
      .filter((k) => checks[k] !== 'ok')
      .sort()
      .join(',');
    if (names === failing && now - warnedAt < NOT_READY_REMINDER_MS) return;
    failing = names;
    warnedAt = now;
    logger.warn(
      { checks: Object.fromEntries(Object.entries(checks).filter(([, v]) => v !== 'ok')) },
      'not ready',
    );
  };
}

async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * /healthz (the process is up), /readyz (PostgreSQL, NATS and an S3 media store answer, and every
 * consume loop of this process takes work), /metrics (Prometheus; the whole serve's, summed over
 * its processes).
 */
export function healthRoutes(app: FastifyInstance, rt: Runtime): void {
  app.get(
    '/healthz',
    {
      schema: {
        ...PUBLIC,
        operationId: 'getLiveness',
        summary: 'Liveness: the process is up',
        response: {
          200: success(Liveness, 'The process is up'),
          ...errorResponses(ANY_PATH_ERRORS),
        },
      },
    },
    async () => ({ status: 'ok' }),
  );
  const readiness = {
    ...PUBLIC,
    operationId: 'getReadiness',
    summary:
      'Readiness: PostgreSQL, NATS and the media store answer, and every consume loop takes work',
    response: {
      200: success(Readiness, 'Ready: every check is "ok"'),
      503: success(Readiness, 'Not ready: the checks that are not "ok" say why'),
      ...errorResponses(ANY_PATH_ERRORS),
    },
  };
  const logReadiness = readinessLog(rt.logger);
  // Its own line, not the request log's error per 503 (see readinessLog).
  app.get('/readyz', { schema: readiness, logLevel: 'silent' }, async (_req, reply) => {
    const checks: Record<string, string> = {};
    await Promise.all([
      within(2000, rt.db.query('SELECT 1')).then(
        () => {
          checks.postgres = 'ok';
        },
        (e: Error) => {
          checks.postgres = e.message;
        },
      ),
      within(2000, rt.nc.flush()).then(
        () => {
          checks.nats = 'ok';
        },
        (e: Error) => {
          checks.nats = e.message;
        },
      ),
      ...(rt.media.check
        ? [
            within(2000, rt.media.check()).then(
              () => {
                checks.media = 'ok';
              },
              (e: Error) => {
                checks.media = e.message;
              },
            ),
          ]
        : []),
    ]);
    // A loop of this process that is not taking work makes it not ready, named, so an operator (or
    // an orchestrator's probe) sees a stopped channel instead of a silent backlog.
    for (const loop of downLoops())
      checks[`loop ${loop.name}`] =
        `not consuming for ${Math.round(loop.sinceMs / 1000)} s: ${loop.reason}`;
    const ready = Object.values(checks).every((v) => v === 'ok');
    logReadiness(checks, ready);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
  });
  const metrics = {
    ...PUBLIC,
    operationId: 'getMetrics',
    summary: 'Prometheus metrics',
    response: {
      200: {
        description: 'The text exposition format',
        content: { 'text/plain': { schema: { type: 'string' } } },
      },
      ...errorResponses(ANY_PATH_ERRORS),
    },
  };
  app.get('/metrics', { schema: metrics }, async (_req, reply) => {
    reply.header('content-type', metricsRegistry.contentType);
    return metricsText();
  });
}
