import t, { type Test } from 'tap';
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { ConfigError, loadConfig } from '@ens/core';
import { buildHealthServer } from '@ens/service-api';
import { freePort, startTestService } from '../harness/service.ts';

/**
 * Slow clients (issue 25): 300 sockets that sent one header line every 5 s stayed open for 330 s,
 * and so did a body trickled 1 byte per 5 s. With header, request and idle timeouts (small ones
 * here, set through the environment as an operator would), each such socket is closed while other
 * requests are served. The API's port and a health port (a process without the api role) both.
 */

const TIMEOUTS = {
  ENS_HTTP_HEADERS_TIMEOUT: '1s',
  ENS_HTTP_REQUEST_TIMEOUT: '2s',
  ENS_HTTP_IDLE_TIMEOUT: '2s',
};
/** Far above the timeouts (checked every quarter of the shortest), with room for a busy machine. */
const CLOSED_WITHIN_MS = 12_000;

/** Opens a socket to the port; `closed` settles with the milliseconds it stayed open. */
function open(port: number, reads = true): { socket: Socket; closed: Promise<number> } {
  const started = Date.now();
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  // A socket that never reads never sees the server's end either; only the server's count tells.
  if (reads) socket.on('data', () => {});
  const closed = new Promise<number>((resolve) =>
    socket.on('close', () => resolve(Date.now() - started)),
  );
  return { socket, closed };
}

/** Writes one piece every `everyMs` until the socket closes. */
function trickle(socket: Socket, piece: () => string, everyMs: number): void {
  const timer = setInterval(() => {
    if (socket.destroyed) clearInterval(timer);
    else socket.write(piece());
  }, everyMs);
  socket.on('close', () => clearInterval(timer));
}

async function slowSockets(t: Test, port: number, server: Server): Promise<void> {
  const headers = open(port);
  headers.socket.write('GET /healthz HTTP/1.1\r\nHost: ens\r\n');
  let n = 0;
  trickle(headers.socket, () => `X-Slow-${n++}: a\r\n`, 300);

  const body = open(port);
  body.socket.write(
    'POST /v2/messages HTTP/1.1\r\nHost: ens\r\nContent-Type: ' +
      'application/json\r\nContent-Length: 1000\r\n\r\n{',
  );
  trickle(body.socket, () => ' ', 300);

  const silent = open(port);

  // Ten that never read what the server answers, as an attacker's need not.
  const deaf = Array.from({ length: 10 }, () => open(port, false));
  for (const d of deaf) {
    d.socket.write('GET /healthz HTTP/1.1\r\nHost: ens\r\n');
    trickle(d.socket, () => 'X-Slow: a\r\n', 300);
  }

  const all = [headers.closed, body.closed, silent.closed];
  const late = new Promise<'open'>((r) => setTimeout(() => r('open'), CLOSED_WITHIN_MS).unref());
  const started = Date.now();

  // Meanwhile other requests are answered at once.
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`, { keepalive: false });
    t.equal(r.status, 200, 'a normal request is served while the slow sockets hang on');
    await new Promise((r) => setTimeout(r, 200));
  }
  const names = ['headers one line at a time', 'a body one byte at a time', 'nothing at all'];
  for (const [i, p] of all.entries()) {
    const ms = await Promise.race([p, late]);
    t.not(ms, 'open', `a socket sending ${names[i]} is closed within ${CLOSED_WITHIN_MS} ms`);
    if (typeof ms === 'number') t.comment(`${names[i]}: closed after ${ms} ms`);
  }
  // The server's side of every socket is gone too (fetch's own connection idles out at 2 s).
  const connections = () => new Promise<number>((r) => server.getConnections((_e, c) => r(c)));
  while ((await connections()) > 0 && Date.now() - started < CLOSED_WITHIN_MS)
    await new Promise((r) => setTimeout(r, 100));
  t.equal(await connections(), 0, 'the server holds no connection, read from or not');
  t.comment(`server side clear after ${Date.now() - started} ms`);
  for (const s of [headers, body, silent, ...deaf]) s.socket.destroy();
}

t.test('the API and health ports close trickling sockets and serve the rest', async (t) => {
  const svc = await startTestService(t, { roles: ['api'], env: TIMEOUTS });
  await slowSockets(t, Number(new URL(svc.baseUrl).port), svc.roles.api!.server);

  // A worker, callbacks or feed process serves its probes on ENS_HEALTH_PORT, with the same limits.
  const health = await buildHealthServer(svc.rt);
  t.teardown(() => health.close());
  const port = await freePort();
  await health.listen({ port, host: '127.0.0.1' });
  await slowSockets(t, port, health.server);
});

t.test(
  'the timeouts have defaults, and a request timeout shorter than the headers one is refused',
  async (t) => {
    const c = loadConfig({});
    t.equal(c.httpHeadersTimeoutMs, 20_000);
    t.equal(c.httpRequestTimeoutMs, 30_000);
    t.equal(c.httpIdleTimeoutMs, 65_000);
    t.throws(
      () => loadConfig({ ENS_HTTP_HEADERS_TIMEOUT: '40s', ENS_HTTP_REQUEST_TIMEOUT: '30s' }),
      ConfigError,
    );
  },
);
