import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import t from 'tap';
import { freePort } from '@ens/local-engines';
import { startTestEngines } from '../harness/engines.ts';
import { runEns, spawnEns } from '../harness/ens-process.ts';
import { postgresTemplate } from '../harness/postgres-template.ts';
import { scratchRoot } from '../harness/scratch-root.ts';
import { TEST_ENV } from '../harness/service.ts';

const execFileAsync = promisify(execFile);

/**
 * An operator command says which database it uses, and does not quietly start a PostgreSQL of its
 * own under another data directory while an `ens serve` runs: found when `npx ens clients create`
 * in a second shell (without the server's ENS_DATA_DIR) created the client in a new ./.ens
 * database, exited 0, and the running server never saw the client.
 */

const engines = await startTestEngines(t);
const root = await mkdtemp(join(await scratchRoot(), 'ens-engines-choice-'));
await chmod(root, 0o755);
t.teardown(() => rm(root, { recursive: true, force: true }));
const serverDir = join(root, 'server');
const otherDir = join(root, 'other');

// The environment of a second shell: none of the server's variables.
const { DATABASE_URL: _d, NATS_URL: _n, ENS_DATA_DIR: _e, ...bare } = process.env;
// Their own TMPDIR, where `ens serve` notes itself: other tests' servers on this machine (tests run
// in parallel) stay out of this test's view.
const tmp = join(root, 'tmp');
await mkdir(tmp);
const shell = (extra: Record<string, string>) => ({
  ...(bare as Record<string, string>),
  ...TEST_ENV,
  TMPDIR: tmp,
  ...extra,
});

const port = await freePort();
const serve = spawnEns(['serve', '--roles', 'api'], {
  ...TEST_ENV,
  TMPDIR: tmp,
  DATABASE_URL: engines.databaseUrl,
  NATS_URL: engines.natsUrl,
  ENS_DATA_DIR: serverDir,
  PORT: String(port),
});
t.teardown(async () => {
  serve.child.kill('SIGINT');
  await serve.exited;
});
for (let i = 0; ; i++) {
  if (
    await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    )
  )
    break;
  if (i > 240) throw new Error(`ens serve did not get ready:\n${serve.output()}`);
  await sleep(250);
}

t.test("a second shell without the server's settings is refused, with the fix", async (t) => {
  const r = await runEns(
    ['clients', 'create', '--name', 'lost'],
    shell({ ENS_DATA_DIR: otherDir }),
  );
  t.equal(r.code, 2, 'exit 2');
  t.equal(r.stdout, '', 'no client was created');
  t.match(
    r.stderr,
    new RegExp(
      `^ens: ens serve \\(pid ${serve.child.pid}\\) runs with ENS_DATA_DIR=${serverDir}, and this command would start a second PostgreSQL under ${otherDir}`,
    ),
  );
  t.match(r.stderr, /set DATABASE_URL as that server has, or pass --own-engines/);
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
});

t.test('with DATABASE_URL it says which database it uses, without the password', async (t) => {
  const r = await runEns(
    ['clients', 'create', '--name', 'found'],
    shell({ ENS_DATA_DIR: otherDir, DATABASE_URL: engines.databaseUrl }),
  );
  t.equal(r.code, 0, r.stderr);
  t.match(
    r.stderr,
    /^ens: using the database at DATABASE_URL \(postgres:\/\/ens:\*\*\*@127\.0\.0\.1:\d+\/ens\)/,
  );
  t.notMatch(r.stderr, /ens:[0-9a-f]{32}@/, 'the password is not printed');
  const { client_id: id } = JSON.parse(r.stdout) as { client_id: string };
  const list = await runEns(['clients', 'list'], {
    ...TEST_ENV,
    DATABASE_URL: engines.databaseUrl,
  });
  t.ok(
    (JSON.parse(list.stdout) as { client_id: string }[]).some((c) => c.client_id === id),
    'and the client is where the server reads',
  );
});

t.test(
  '--own-engines starts engines under the data directory on purpose, and says so',
  async (t) => {
    // A copy of the test template stands in for initdb (the choice is tested, not initdb).
    await execFileAsync('mkdir', ['-p', otherDir]);
    await execFileAsync('cp', ['-a', await postgresTemplate(), join(otherDir, 'postgres')]);
    const r = await runEns(['clients', 'list', '--own-engines'], shell({ ENS_DATA_DIR: otherDir }));
    t.equal(r.code, 0, r.stderr);
    t.match(
      r.stderr,
      new RegExp(
        `^ens: no ens serve runs on ENS_DATA_DIR=${otherDir}: starting PostgreSQL under it for this command; it stops when the command ends`,
      ),
    );
    t.same(JSON.parse(r.stdout), [], 'its own, empty, database');
  },
);

t.test("a second shell finds the running server's API as it finds its database", async (t) => {
  // Found with PORT=18580: `ens token` in another shell called 8080 and failed.
  const made = await runEns(
    ['clients', 'create', '--name', 'finder'],
    shell({ ENS_DATA_DIR: serverDir, DATABASE_URL: engines.databaseUrl }),
  );
  t.equal(made.code, 0, made.stderr);
  const clientFile = join(root, 'finder.secret.json');
  await writeFile(clientFile, made.stdout);

  const url = await runEns(['url'], shell({ ENS_DATA_DIR: serverDir }));
  t.equal(url.code, 0, url.stderr);
  t.equal(url.stdout, `http://127.0.0.1:${port}\n`, "ens url prints the serve's address");
  t.match(
    url.stderr,
    `the ens serve running on ENS_DATA_DIR=${serverDir} (pid ${serve.child.pid})`,
  );

  const token = await runEns(
    ['token', '--client-file', clientFile],
    shell({ ENS_DATA_DIR: serverDir }),
  );
  t.equal(token.code, 0, token.stderr);
  t.match(token.stdout, /^[\w-]+\.[\w-]+\.[\w-]+\n$/, 'a token, alone on stdout');
  t.match(token.stderr, `ens: using the API at http://127.0.0.1:${port} (from the ens serve`);

  const given = await runEns(
    ['url'],
    shell({ ENS_DATA_DIR: serverDir, ENS_URL: 'https://ens.example.com/' }),
  );
  t.equal(given.stdout, 'https://ens.example.com\n', 'ENS_URL wins over the running serve');
  const none = await runEns(['url'], shell({ ENS_DATA_DIR: otherDir, PORT: '18580' }));
  t.equal(none.stdout, 'http://127.0.0.1:18580\n', 'no serve on the data directory: HOST:PORT');
});
