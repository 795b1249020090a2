import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { freePort } from '../../../test/harness/service.ts';
import { createPool, type Db } from '../src/db/pool.ts';
import { isDatabaseUnavailable } from '../src/db/unavailable.ts';
import { startTestEngines } from '../../../test/harness/engines.ts';
import { runEns } from '../../../test/harness/ens-process.ts';
import { multiHostUrl, startStandby } from '../../../test/harness/pg-standby.ts';

/*
 * A libpq multi-host DATABASE_URL against a real primary and its streaming standby: every
 * connection a pool opens is on a host that suits target_session_attrs, found in the URL's order;
 * when none does, the error names each host and why; after the primary dies and the standby is
 * promoted, the same pools find it without a restart.
 */

/** The server port of each of `n` connections held at once, and whether it is a standby. */
async function whereConnectionsLand(db: Db, n: number): Promise<Set<string>> {
  const clients = await Promise.all(Array.from({ length: n }, () => db.connect()));
  try {
    const rows = await Promise.all(
      clients.map((c) =>
        c.query<{ port: number; standby: boolean }>(
          'SELECT inet_server_port() AS port, pg_is_in_recovery() AS standby',
        ),
      ),
    );
    return new Set(rows.map((r) => `${r.rows[0]!.port}${r.rows[0]!.standby ? ' standby' : ''}`));
  } finally {
    for (const c of clients) c.release();
  }
}

t.test('a multi-host DATABASE_URL against a primary and its standby', async (t) => {
  const engines = await startTestEngines(t);
  const primary = engines.postgres;
  const standby = await startStandby(t, primary, { synchronous: false });
  const dead = await freePort();
  const url = (ports: number[], attrs?: string) => multiHostUrl(primary.url, ports, attrs);
  const pools: Db[] = [];
  const pool = (url: string) => {
    const p = createPool(url, { max: 8 });
    pools.push(p);
    return p;
  };
  t.teardown(() => Promise.all(pools.map((p) => p.end().catch(() => {}))));

  await t.test('ens migrate starts with it, the standby listed first', async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'ens-multihost-'));
    t.teardown(() => rm(dataDir, { recursive: true, force: true }));
    const r = await runEns(['migrate'], {
      DATABASE_URL: url([standby.handle.port, primary.port], 'read-write'),
      ENS_DATA_DIR: dataDir,
    });
    t.equal(r.code, 0, `exit 0 (${r.stderr.trim().split('\n').at(-1)})`);
  });

  await t.test('every connection lands on the primary, whatever the order', async (t) => {
    for (const [order, what] of [
      [[standby.handle.port, primary.port], 'standby first'],
      [[dead, standby.handle.port, primary.port], 'a dead host, then the standby'],
      [[primary.port, standby.handle.port], 'primary first'],
    ] as const) {
      for (const attrs of ['read-write', 'primary', undefined]) {
        const db = pool(url([...order], attrs));
        t.same(
          [...(await whereConnectionsLand(db, 8))],
          [String(primary.port)],
          `${what}, target_session_attrs=${attrs ?? '(unset)'}: all 8 on the primary`,
        );
      }
    }
  });

  await t.test('no host suits: one error naming every host and why', async (t) => {
    const db = pool(url([dead, standby.handle.port], 'read-write'));
    const err = await db.query('SELECT 1').then(
      () => undefined,
      (e: unknown) => e as { code?: string; refusals?: { host: string; why: string }[] },
    );
    t.equal(err?.code, 'ENS_ERR_DB_NO_SUITABLE_HOST');
    t.match(err?.refusals, [
      { host: `127.0.0.1:${dead}`, why: /could not connect: .*ECONNREFUSED/ },
      { host: `127.0.0.1:${standby.handle.port}`, why: /a standby \(in recovery\)/ },
    ]);
    t.ok(isDatabaseUnavailable(err), 'an outage to wait out, not a configuration error');
    t.notMatch(String((err as Error).message), new URL(primary.url).password, 'no password');
  });

  await t.test('the primary killed, the standby promoted: the same pool finds it', async (t) => {
    const db = pool(url([primary.port, standby.handle.port], 'read-write'));
    t.same([...(await whereConnectionsLand(db, 4))], [String(primary.port)]);
    await primary.kill9();
    const during = await db.query('SELECT 1').then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(isDatabaseUnavailable(during), 'before the promotion: unavailable, as an outage');
    const promoted = Date.now();
    await standby.promote();
    let ok = false;
    while (!ok && Date.now() - promoted < 10_000) {
      ok = await db.query('SELECT 1').then(
        () => true,
        () => false,
      );
      if (!ok) await new Promise((r) => setTimeout(r, 50));
    }
    t.ok(ok, `queries work again ${Date.now() - promoted} ms after the promotion began`);
    t.same(
      [...(await whereConnectionsLand(db, 8))],
      [String(standby.handle.port)],
      'every connection on the promoted standby',
    );
  });
});
