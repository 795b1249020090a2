import { stat } from 'node:fs/promises';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import t from 'tap';
import { startTestEngines } from './engines.ts';

t.test('startTestEngines gives a working database and NATS, removed at teardown', async (tt) => {
  let dir = '';
  await tt.test('start', async (inner) => {
    const began = performance.now();
    const engines = await startTestEngines(inner);
    inner.comment(`startTestEngines took ${Math.round(performance.now() - began)} ms`);
    dir = engines.dir;

    const client = new pg.Client(engines.databaseUrl);
    await client.connect();
    const { rows } = await client.query('select current_database() as db');
    await client.end();
    inner.same(rows, [{ db: 'ens' }]);

    const nc = await connect({ servers: engines.natsUrl });
    await nc.flush();
    await nc.close();
  });
  await tt.rejects(stat(dir), { code: 'ENOENT' }, 'teardown removed the scratch directory');
});

t.test('parallel starts get separate engines', async (tt) => {
  const [a, b] = await Promise.all([startTestEngines(tt), startTestEngines(tt)]);
  tt.not(a.databaseUrl, b.databaseUrl);
  tt.not(a.natsUrl, b.natsUrl);
  tt.not(a.dir, b.dir);
});

t.test('a postgres killed by the test is restarted and stopped cleanly at teardown', async (tt) => {
  const engines = await startTestEngines();
  await engines.postgres.kill9();
  await engines.stop();
  tt.equal(engines.postgres.pid, undefined, 'not left running');
  await tt.rejects(stat(engines.dir), { code: 'ENOENT' }, 'scratch directory removed');
});
