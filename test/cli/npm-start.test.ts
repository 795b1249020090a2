import { execFile, spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { freePort } from '@ens/local-engines';
import { postgresTemplate } from '../harness/postgres-template.ts';
import { scratchRoot } from '../harness/scratch-root.ts';

const execFileAsync = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * `npm start` stopped by a signal to npm's own process (what a process manager or `kill` does)
 * stops ENS and the engines it started. It used to leave `ens serve`, PostgreSQL and nats-server
 * running: npm signalled the shell of the script, and the shell did not pass it on.
 */

/** Processes whose command line names `needle`, this test's data directory. */
async function processesWith(needle: string): Promise<string[]> {
  const r = await execFileAsync('pgrep', ['-af', needle]).catch(() => ({ stdout: '' }));
  return r.stdout.split('\n').filter((l) => l.trim() && !l.includes('pgrep'));
}

/** The pid of the process listening on 127.0.0.1:`port`, from ss; undefined when none is. */
async function listenerPid(port: number): Promise<number | undefined> {
  const { stdout } = await execFileAsync('ss', ['-ltnpH', `sport = :${port}`]);
  const m = /pid=(\d+)/.exec(stdout);
  return m ? Number(m[1]) : undefined;
}

/**
 * Starts `npm start` on a copy of the test template and waits until it is ready. `detached` puts
 * npm in a process group of its own, as a terminal's foreground job is.
 *
 * Ready means /readyz answers 200 from npm's own child: the port comes from freePort and may be
 * taken by another test file's process before ENS binds it. A full run with three test files at a
 * time once got a 200 from such a process while npm was still building, and signalled the build's
 * shell instead of `ens serve` (ESRCH). When the port was taken, npm start runs again on a new one.
 */
async function startNpm(t: Test, detached: boolean) {
  const dir = await mkdtemp(join(await scratchRoot(), 'ens-npm-start-'));
  // When we are root PostgreSQL runs as the postgres user, which must be able to reach its data
  // dir.
  await chmod(dir, 0o755);
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const dataDir = join(dir, 'data');
  await mkdir(dataDir);
  // A copy of the test template instead of initdb: the start is what is tested, not initdb.
  await execFileAsync('cp', ['-a', await postgresTemplate(), join(dataDir, 'postgres')]);
  t.teardown(async () => {
    for (const line of await processesWith(dataDir))
      process.kill(Number(line.split(' ')[0]), 'SIGKILL');
  });
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? dir,
      ENS_DATA_DIR: dataDir,
      PORT: String(port),
      ENS_LOG_LEVEL: 'warn',
    };
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env,
      detached,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout.on('data', (c: Buffer) => (output += c.toString()));
    npm.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((r) => npm.once('exit', (code) => r(code)));

    const deadline = Date.now() + 90_000;
    for (;;) {
      if (npm.exitCode !== null || npm.signalCode !== null) break;
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) {
        const listener = await listenerPid(port);
        const { stdout } = await execFileAsync('pgrep', ['-P', String(npm.pid)]).catch(() => ({
          stdout: '',
        }));
        if (listener !== undefined && stdout.trim().split('\n').includes(String(listener)))
          return { npm, exited, dataDir, port, servePid: listener, output: () => output };
      }
      if (Date.now() > deadline) throw new Error(`npm start did not get ready:\n${output}`);
      await sleep(250);
    }
    await exited;
    if (attempt >= 3 || !/EADDRINUSE|address already in use/i.test(output))
      throw new Error(`npm start exited before it was ready:\n${output}`);
  }
}

/** Waits for npm to exit, then checks that nothing of this ENS is left. */
async function checkAllStopped(t: Test, run: Awaited<ReturnType<typeof startNpm>>) {
  const timeout = new Promise<boolean>((r) => setTimeout(() => r(false), 30_000).unref());
  t.ok(await Promise.race([run.exited.then(() => true), timeout]), 'npm exits');
  const gone = Date.now() + 20_000;
  let left = await processesWith(run.dataDir);
  while (left.length > 0 && Date.now() < gone) {
    await sleep(250);
    left = await processesWith(run.dataDir);
  }
  t.same(
    left,
    [],
    'no process of this ENS is left: not ens serve, not PostgreSQL, not nats-server',
  );
  t.notOk(
    await fetch(`http://127.0.0.1:${run.port}/healthz`).then(
      () => true,
      () => false,
    ),
    'nothing answers on its port',
  );
}

t.test('SIGTERM to npm start stops ENS and its engines', async (t) => {
  const run = await startNpm(t, false);
  const running = await processesWith(run.dataDir);
  t.ok(
    running.some((l) => l.includes('postgres')),
    'PostgreSQL runs under the data directory',
  );
  t.ok(
    running.some((l) => l.includes('nats-server')),
    'and nats-server',
  );
  run.npm.kill('SIGTERM');
  await checkAllStopped(t, run);
});

/**
 * Ctrl-C in a terminal signals the whole foreground group: npm and ENS get SIGINT together and
 * npm passes its copy on, so ENS saw two signals within milliseconds and took the second for an
 * operator's "exit now", skipping its orderly stop.
 */
t.test('Ctrl-C (SIGINT to the group) is one orderly stop, not an exit now', async (t) => {
  const run = await startNpm(t, true);
  // startNpm found it: npm's child that answers on the port.
  const serve = run.servePid;
  t.ok(serve > 0, 'ens serve runs under npm');
  process.kill(-run.npm.pid!, 'SIGINT');
  // What npm's forwarding does, made certain: the same SIGINT again, a few milliseconds later.
  await sleep(10);
  process.kill(serve, 'SIGINT');
  await checkAllStopped(t, run);
  t.notMatch(run.output(), /second signal/, 'the echo of one Ctrl-C is not a second signal');
  // The Ctrl-C reaches ENS alone: PostgreSQL and nats-server, in a process group of their own,
  // are stopped by ENS after its roles. In npm's group they got the SIGINT too, and PostgreSQL's
  // fast shutdown cut the roles' connections in the middle of their orderly stop.
  t.notMatch(
    run.output(),
    /terminating connection|not queryable|"level":(40|50)/,
    'no role loses its database during the stop (no warning, no error)',
  );
});
