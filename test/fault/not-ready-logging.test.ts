import t from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { freePort } from '@ens/local-engines';
import { CALLBACK_STREAM } from '@ens/core/internal';
import { startTestEngines } from '../harness/engines.ts';
import { spawnEns } from '../harness/ens-process.ts';
import { TEST_ENV, waitFor } from '../harness/service.ts';

/**
 * A process that is not ready is probed every few seconds by its orchestrator. Each 503 of /readyz
 * was logged as an error ("request failed"), so a stopped loop buried itself under a line per
 * probe. Now readiness is logged when it changes: one warning naming what fails, none per probe.
 */
t.test('a not-ready process probed twenty times logs one warning and no errors', async (t) => {
  const engines = await startTestEngines(t);
  const dataDir = await mkdtemp(join(tmpdir(), 'ens-data-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const ens = spawnEns(['serve'], {
    ...TEST_ENV,
    DATABASE_URL: engines.databaseUrl,
    NATS_URL: engines.natsUrl,
    ENS_DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
  });
  t.teardown(() => ens.kill9());
  const readyz = () =>
    fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
  await waitFor(async () => (await readyz()) === 200, 30_000, '/readyz 200');

  // The callbacks stream replaced by one that refuses the consumer keeps that loop down (as in
  // consumer-deleted.test.ts).
  const nc = await connect({ servers: engines.natsUrl });
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(CALLBACK_STREAM);
  await jsm.streams
    .add({ name: CALLBACK_STREAM, subjects: ['ens.callbacks.blocked'], max_consumers: 0 } as never)
    .catch(() => {});
  await waitFor(async () => (await readyz()) === 503, 20_000, '/readyz 503');
  const from = ens.output().length;
  const statuses: number[] = [];
  for (let i = 0; i < 20; i++) {
    statuses.push(await readyz());
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 500));
  t.same([...new Set(statuses)], [503], 'every probe answered 503');

  const lines = ens
    .output()
    .slice(from)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; url?: string });
  const everything = ens
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; url?: string });
  t.same(
    lines.filter((l) => l.level >= 50 && l.url === '/readyz'),
    [],
    'no error line for a probe',
  );
  const warnings = everything.filter((l) => l.msg === 'not ready');
  t.ok(
    warnings.length >= 1 && warnings.length <= 2,
    `${warnings.length} "not ready" warning(s) in all, not one per probe`,
  );
});
