import t, { type Test } from 'tap';
import { migrate, type ClientStore } from '@ens/core';
import { ClientDirectory, createPool, type Db } from '@ens/core/internal';
import { startTestEngines } from '../harness/engines.ts';
import { overriding } from '../harness/overriding.ts';

/*
 * The api role's client directory keeps one pooled session LISTENing for client changes and
 * listens anew when it is lost. A session checked out while the directory closed, or whose LISTEN
 * failed, was never released, and the pool's end() waits for every checked-out client: the role's
 * stop hung. Found looking into a CI-like run where test/api/openapi-live.test.ts hung in its
 * teardown for 100 s right after PostgreSQL had been killed and started again. Each case stops a
 * connect or a LISTEN where the old code lost the client (both failed before the fix), then checks
 * that the pool ends.
 */
const ENDS_WITHIN_MS = 5_000;
/** The directory only reads clients through the store on a miss; none is asked for here. */
const noStore = {} as ClientStore;

async function bench(t: Test) {
  const engines = await startTestEngines(t);
  const pool = createPool(engines.databaseUrl, { max: 4 });
  await migrate(pool);
  /** Resolves once the pool has ended; rejects after ENDS_WITHIN_MS. */
  const ends = () =>
    Promise.race([
      pool.end().then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), ENDS_WITHIN_MS).unref()),
    ]);
  return { engines, pool, ends };
}

/** `pool` with its connect() held until `open` is called. */
function gatedConnect(pool: Db) {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let asked = 0;
  const db = overriding(pool, 'connect', (async () => {
    asked++;
    await gate;
    return pool.connect();
  }) as Db['connect']);
  return { db, open, asked: () => asked };
}

t.test('closed while its session is being connected: the pool still ends', async (t) => {
  const b = await bench(t);
  const g = gatedConnect(b.pool);
  const directory = new ClientDirectory(g.db, noStore);
  const starting = directory.start();
  t.equal(g.asked(), 1, 'the directory is connecting its session');
  await directory.close();
  g.open();
  await starting;
  t.ok(await b.ends(), `the pool ends within ${ENDS_WITHIN_MS} ms`);
});

t.test('its LISTEN fails (PostgreSQL killed after the connect): the pool still ends', async (t) => {
  const b = await bench(t);
  // The session connects; PostgreSQL dies just before its LISTEN goes out.
  const db = overriding(b.pool, 'connect', (async () => {
    const c = await b.pool.connect();
    const query = c.query.bind(c) as (...a: unknown[]) => Promise<unknown>;
    (c as unknown as { query: unknown }).query = async (...a: unknown[]) => {
      if (/^LISTEN/.test(String(a[0]))) await b.engines.postgres.kill9();
      return query(...a);
    };
    return c;
  }) as Db['connect']);
  const directory = new ClientDirectory(db, noStore);
  await directory.start();
  await directory.close();
  t.ok(await b.ends(), `the pool ends within ${ENDS_WITHIN_MS} ms`);
});

t.test('lost and listening again, then closed: the pool ends, nothing is uncaught', async (t) => {
  const b = await bench(t);
  const uncaught: Error[] = [];
  const onUncaught = (e: Error) => uncaught.push(e);
  process.prependListener('uncaughtException', onUncaught);
  t.teardown(() => process.off('uncaughtException', onUncaught));
  const directory = new ClientDirectory(b.pool, noStore);
  await directory.start();
  for (let i = 0; i < 3; i++) {
    await b.engines.postgres.kill9();
    await new Promise((r) => setTimeout(r, 300));
    await b.engines.postgres.start();
    await new Promise((r) => setTimeout(r, 200 + i * 400));
  }
  await directory.close();
  t.ok(await b.ends(), `the pool ends within ${ENDS_WITHIN_MS} ms`);
  t.same(
    uncaught.map((e) => e.message),
    [],
    'no error reached the process',
  );
});
