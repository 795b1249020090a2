import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { freePort } from '@ens/local-engines';
import { runEns } from '../harness/ens-process.ts';
import { alive, startServe } from '../harness/serve-processes.ts';
import { startTestService, TEST_ENV } from '../harness/service.ts';

/*
 * ENS_PROCESSES: how an `ens serve` of several processes starts and stops. Ctrl-C reaches every
 * process of the group; a process that cannot start fails the start instead of restarting in a
 * loop; a PostgreSQL without connections for every process is refused before any starts.
 */

t.test('Ctrl-C (SIGINT to the process group) stops them all with exit 0', async (t) => {
  const svc = await startTestService(t, { roles: [] });
  const { p, pids } = await startServe(t, svc, { ENS_PROCESSES: '2' });
  process.kill(-p.child.pid!, 'SIGINT');
  t.equal(await p.exited, 0, 'exit 0');
  for (const pid of pids) t.notOk(alive(pid), `process ${pid} stopped`);
  t.notMatch(p.output(), /second signal|starting it again/, 'neither a forced exit nor a restart');
});

t.test(
  'a process that cannot start fails the start, with its reason, and leaves no process behind',
  async (t) => {
    const svc = await startTestService(t, { roles: [] });
    const taken = net.createServer();
    const port = await new Promise<number>((r) =>
      taken.listen(0, '127.0.0.1', () => r((taken.address() as net.AddressInfo).port)),
    );
    t.teardown(() => taken.close());
    const dataDir = await mkdtemp(join(tmpdir(), 'ens-procs-'));
    t.teardown(() => rm(dataDir, { recursive: true, force: true }));
    const r = await runEns(['serve'], {
      ...svc.env,
      ENS_DATA_DIR: dataDir,
      PORT: String(port),
      ENS_PROCESSES: '2',
    });
    t.equal(r.code, 2, 'exit 2, as for any setting to change');
    t.match(
      r.stderr + r.stdout,
      /ens: cannot listen on 127\.0\.0\.1:\d+ \(EADDRINUSE: another process uses the port\); set PORT/,
      'the reason is shown on one line',
    );
    t.match(r.stderr + r.stdout, /stopped before it was ready/, 'and which process failed');
  },
);

t.test(
  'more processes than PostgreSQL has connections for: refused at start with the numbers',
  async (t) => {
    const svc = await startTestService(t, { roles: [] });
    const dataDir = await mkdtemp(join(tmpdir(), 'ens-procs-'));
    t.teardown(() => rm(dataDir, { recursive: true, force: true }));
    const r = await runEns(['serve'], {
      ...TEST_ENV,
      DATABASE_URL: svc.env.DATABASE_URL!,
      NATS_URL: svc.env.NATS_URL!,
      ENS_DATA_DIR: dataDir,
      PORT: String(await freePort()),
      ENS_PROCESSES: '200',
    });
    t.equal(r.code, 2, 'exit 2');
    t.match(
      r.stderr,
      /ENS_PROCESSES=200: the processes may open up to \d+ PostgreSQL connections, and the server has \d+ free of max_connections=\d+/,
    );
  },
);
