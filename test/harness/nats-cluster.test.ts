import { createServer, connect as tcpConnect, type Server } from 'node:net';
import t from 'tap';
import { EngineStartError, freePort } from '@ens/local-engines';
import { startNatsCluster } from './nats-cluster.ts';

/** A port held by a listener of this test, as another test file's engine would hold it. */
async function holdPort(t: { teardown(fn: () => unknown): void }): Promise<number> {
  // The other nodes dial it as a route: such a connection is closed at once, and its reset when
  // they stop is not an error here.
  const server: Server = createServer((socket) => socket.on('error', () => {}).destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as { port: number }).port;
}

/** Whether something accepts connections on the port now. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/*
 * At --jobs=3 a route port the cluster had picked was bound by another test file's engine before
 * its node started: that node failed, the two that had started were never stopped, and the test
 * file hung until tap's 240 s timeout. The cluster now starts again on new ports, and a start that
 * fails for good stops every node it started.
 */
t.test(
  'a route port taken before its node starts: the cluster starts again on new ports',
  async (t) => {
    const taken = await holdPort(t);
    let calls = 0;
    const cluster = await startNatsCluster(t, 3, {
      pickPort: async () => (++calls === 1 ? taken : freePort()),
    });
    t.equal(cluster.nodes.length, 3, 'three nodes');
    t.ok(calls > 6, `a second set of ports was picked (${calls} picks for 6 ports)`);
    t.ok((await cluster.caughtUp(30_000)) >= 0, 'JetStream has its leaders on the three');
  },
);

t.test(
  'a port taken on every attempt: the start fails, and no node it started is left running',
  async (t) => {
    const taken = await holdPort(t);
    const picks: number[] = [];
    // An attempt picks six distinct ports (three route, three monitoring); the first of each
    // attempt, node 1's route port, is the taken one.
    let attempt = new Set<number>();
    const started = Date.now();
    const error = await startNatsCluster(t, 3, {
      pickPort: async () => {
        if (attempt.size === 6) attempt = new Set();
        const port = attempt.size === 0 ? taken : await freePort();
        attempt.add(port);
        picks.push(port);
        return port;
      },
    }).then(
      () => undefined,
      (err: unknown) => err,
    );
    t.ok(error instanceof EngineStartError, 'an engine start error');
    t.match(String((error as Error).message), /address already in use/, 'naming the taken port');
    t.equal(picks.filter((p) => p === taken).length, 4, 'after four attempts');
    t.ok(Date.now() - started < 60_000, 'promptly, not at a timeout');
    const others = [...new Set(picks.filter((p) => p !== taken))];
    t.ok(others.length >= 20, `${others.length} other ports picked`);
    for (const port of others) t.notOk(await listening(port), `nothing listens on port ${port}`);
  },
);
