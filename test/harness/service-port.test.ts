import t from 'tap';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { freePort } from '@ens/local-engines';
import { startTestService } from './service.ts';

/*
 * startTestService picks a free port, then opens the runtime, migrates and only then listens: in
 * between another process can take the port (parallel test files, and outbound connections, draw
 * from the same ephemeral range). A CI run failed so (EADDRINUSE), then hung to tap's timeout
 * with its runtime left open.
 */
t.test('a port another process takes before the API listens is picked again', async (t) => {
  const other = createServer();
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => other.close(() => r())));
  const taken = (other.address() as AddressInfo).port;
  const picks: number[] = [];
  const svc = await startTestService(t, {
    roles: ['api'],
    pickPort: async () => {
      const p = picks.length === 0 ? taken : await freePort();
      picks.push(p);
      return p;
    },
  });
  t.equal(picks.length, 2, 'the taken port, then another');
  t.equal(svc.baseUrl, `http://127.0.0.1:${picks[1]}`, 'the service is where it listens');
  t.equal((await fetch(`${svc.baseUrl}/healthz`)).status, 200, 'and answers there');
});
