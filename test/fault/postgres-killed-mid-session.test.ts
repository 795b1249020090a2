import t from 'tap';
import { migrate } from '@ens/core';
import { createPool, refreshStatistics, type Db } from '@ens/core/internal';
import { startTestEngines } from '../harness/engines.ts';
import { overriding } from '../harness/overriding.ts';

/*
 * Found reproducing a CI timeout: PostgreSQL killed under a running ENS ended the test's process
 * with an uncaught "terminating connection due to unexpected postmaster exit" (1 run in 4 of a
 * kill9-and-start loop). The table-statistics job (every 5 s) holds an advisory lock on a client
 * checked out of the pool while it reads which tables are stale through the pool; PostgreSQL dying
 * then is an 'error' event on that idle client, and it had no listener. In an ENS process nothing
 * catches it either: the process exits. Here PostgreSQL is killed exactly in that window.
 */
t.test(
  'PostgreSQL killed while a job holds a session: the job fails, the process lives',
  async (t) => {
    const engines = await startTestEngines(t);
    const pool = createPool(engines.databaseUrl, { max: 4 });
    t.teardown(() => pool.end());
    await migrate(pool);

    const uncaught: Error[] = [];
    const onUncaught = (e: Error) => uncaught.push(e);
    process.prependListener('uncaughtException', onUncaught);
    t.teardown(() => process.off('uncaughtException', onUncaught));

    // The job's reads through the pool: the first one kills PostgreSQL, then waits for the held
    // session to hear of it.
    let killed = false;
    const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
    const killing = overriding(pool, 'query', (async (...args: unknown[]) => {
      if (!killed) {
        killed = true;
        await engines.postgres.kill9();
        await new Promise((r) => setTimeout(r, 300));
      }
      return query(...args);
    }) as Db['query']);

    await t.rejects(refreshStatistics(killing), 'the job reports the failure');
    t.ok(killed, 'PostgreSQL was killed while the job held its session');
    await new Promise((r) => setTimeout(r, 200));
    t.same(
      uncaught.map((e) => e.message),
      [],
      'nothing reached the process as an uncaught exception',
    );

    // The broken client was thrown away: with PostgreSQL back, the pool works and the job runs.
    await engines.postgres.start();
    t.equal((await pool.query('SELECT 1 AS one')).rows[0]?.one, 1, 'the pool works again');
    await t.resolves(refreshStatistics(pool), 'the job runs again');
  },
);
