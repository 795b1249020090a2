import t from 'tap';
import { freePort } from '@ens/local-engines';
import { startTestEngines } from '../harness/engines.ts';
import { spawnEns } from '../harness/ens-process.ts';
import { TEST_ENV, waitFor } from '../harness/service.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A role process started while NATS or PostgreSQL is away waits for it, warning, instead of
 * exiting: before this, `ens serve --roles worker,callbacks,feed` started during a NATS restart
 * exited with "ConnectionError: connection refused" and left no worker at all. Only a
 * configuration error ends the process.
 */

async function readyz(port: number): Promise<number | null> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
  } catch {
    return null;
  }
}

for (const away of ['nats', 'postgres'] as const) {
  t.test(`${away} away at start: the process waits, then serves`, async (t) => {
    const engines = await startTestEngines(t);
    const dataDir = await mkdtemp(join(tmpdir(), 'ens-data-'));
    t.teardown(() => rm(dataDir, { recursive: true, force: true }));
    const engine = away === 'nats' ? engines.nats : engines.postgres;
    await engine.stop();
    const port = await freePort();
    const ens = spawnEns(['serve'], {
      ...TEST_ENV,
      ENS_LOG_LEVEL: 'warn',
      DATABASE_URL: engines.databaseUrl,
      NATS_URL: engines.natsUrl,
      ENS_DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
    });
    t.teardown(() => ens.kill9());
    // Waits for the warning rather than a fixed time: on a loaded machine starting the process
    // alone can take seconds.
    const warned = await Promise.race([
      ens.exited.then((code) => `exited with ${code}`),
      waitFor(async () => /"level":40/.test(ens.output()), 30_000, 'a warning that it waits').then(
        () => 'warned',
      ),
    ]);
    t.equal(
      warned,
      'warned',
      `it warned that it is waiting, and did not exit (output: ${ens.output().slice(-400)})`,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    t.equal(ens.child.exitCode, null, 'still running after the warning');
    await engine.start();
    await waitFor(
      async () => (await readyz(port)) === 200,
      30_000,
      '/readyz to answer 200 once the engine is back',
    );
    t.pass('ready once the engine is back');
  });
}

t.test('a configuration error still ends the process at once', async (t) => {
  const ens = spawnEns(['serve'], {
    ...TEST_ENV,
    ENS_RETRY_BACKOFF: 'soon',
    DATABASE_URL: 'postgres://x@127.0.0.1:1/x',
    NATS_URL: 'nats://127.0.0.1:1',
  });
  t.teardown(() => ens.kill9());
  t.equal(await ens.exited, 2, 'exit 2');
});
