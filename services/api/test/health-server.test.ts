import t from 'tap';
import { createLogger, loadConfig, type Runtime } from '@ens/core';
import { buildHealthServer } from '../src/health-server.ts';

/**
 * The probes' server of a process without the api role (ENS_HEALTH_PORT): found when every worker,
 * callbacks and feed process printed Fastify's FSTDEP023 deprecation warning at start.
 */
t.test('the health server starts without a Fastify deprecation warning', async (t) => {
  const warnings: string[] = [];
  const onWarning = (w: Error & { code?: string }) => warnings.push(w.code ?? w.name);
  process.on('warning', onWarning);
  t.teardown(() => process.off('warning', onWarning));
  const config = loadConfig({ ENS_LOG_LEVEL: 'silent' });
  const rt = { config, logger: createLogger(config) } as unknown as Runtime;
  const app = await buildHealthServer(rt);
  await app.ready();
  await app.close();
  // process.emitWarning delivers on the next tick.
  await new Promise((r) => setImmediate(r));
  t.same(
    warnings.filter((c) => c.startsWith('FST')),
    [],
  );
});
