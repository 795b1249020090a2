import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { MockAgent } from 'undici';
import { closeOutboundConnections } from '@ens/core/internal';
import { postCallback } from '../src/post/poster.ts';
import type { LookupAll } from '@ens/core';

t.teardown(closeOutboundConnections);

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

/** A real server on 127.0.0.1 that records every request and every TCP connection. */
async function startServer(t: Test, handler: Handler) {
  const received: Received[] = [];
  const state = { connections: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  server.on('connection', () => state.connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as AddressInfo;
  return { port, received, state, base: `http://127.0.0.1:${port}` };
}

const rawBody = Buffer.from('{"id":"msg_01","state":"delivered","note":"héllo ✓"}\n', 'utf8');
const signed = {
  'X-ENS-Signature': 'abc123',
  'webhook-id': 'msg_01',
  'webhook-timestamp': '1700000000',
  'webhook-signature': 'v1,AAAA',
};

function lookupFor(map: Record<string, string>) {
  const calls: string[] = [];
  const lookup: LookupAll = async (hostname) => {
    calls.push(hostname);
    const address = map[hostname];
    if (address === undefined) throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
    return [{ address, family: address.includes(':') ? 6 : 4 }];
  };
  return { lookup, calls };
}

t.test('2xx is delivered; the server gets the exact bytes and headers', async (t) => {
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  });
  const out = await postCallback({
    url: `${srv.base}/hooks/ens?x=1`,
    rawBody,
    headers: signed,
    timeoutMs: 5000,
    allowPrivate: true,
  });
  t.same(out, { outcome: 'delivered', status: 200 });
  t.equal(srv.received.length, 1);
  const got = srv.received[0]!;
  t.equal(got.method, 'POST');
  t.equal(got.url, '/hooks/ens?x=1');
  t.ok(got.body.equals(rawBody), 'body bytes are identical');
  t.equal(got.headers['content-type'], 'application/json');
  t.equal(got.headers['user-agent'], 'ENS-Callbacks/1');
  t.equal(got.headers['content-length'], String(rawBody.length));
  t.equal(got.headers.host, `127.0.0.1:${srv.port}`);
  t.equal(got.headers['x-ens-signature'], 'abc123');
  t.equal(got.headers['webhook-id'], 'msg_01');
  t.equal(got.headers['webhook-timestamp'], '1700000000');
  t.equal(got.headers['webhook-signature'], 'v1,AAAA');
});

t.test('any 2xx counts; non-2xx including redirects fails with HTTP status', async (t) => {
  let status = 200;
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(status, status === 302 ? { location: 'http://127.0.0.1:1/' } : {});
    res.end(status === 204 ? undefined : 'x');
  });
  const post = () =>
    postCallback({
      url: `${srv.base}/cb`,
      rawBody,
      headers: {},
      timeoutMs: 5000,
      allowPrivate: true,
    });
  status = 204;
  t.same(await post(), { outcome: 'delivered', status: 204 });
  status = 299;
  t.same(await post(), { outcome: 'delivered', status: 299 });
  status = 500;
  t.same(await post(), { outcome: 'failed', status: 500, error: 'HTTP 500' });
  status = 503;
  t.same(await post(), { outcome: 'failed', status: 503, error: 'HTTP 503' });
  status = 404;
  t.same(await post(), { outcome: 'failed', status: 404, error: 'HTTP 404' });
  status = 302;
  t.same(
    await post(),
    { outcome: 'failed', status: 302, error: 'HTTP 302' },
    'redirect not followed',
  );
  t.equal(srv.received.length, 6);
});

t.test('keep-alive: sequential posts reuse one connection, even after a large body', async (t) => {
  let big = false;
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(200);
    res.end(big ? Buffer.alloc(1_000_000, 'x') : 'ok');
  });
  const post = () =>
    postCallback({
      url: `${srv.base}/cb`,
      rawBody,
      headers: {},
      timeoutMs: 5000,
      allowPrivate: true,
    });
  for (let i = 0; i < 10; i++) t.same(await post(), { outcome: 'delivered', status: 200 });
  // undici hands a socket back to its pool a tick after the body ends, so a back-to-back loop
  // alternates between two sockets (a bare undici loop does the same); what matters is that
  // it is not one connection per post.
  t.ok(srv.state.connections <= 2, `${srv.state.connections} TCP connections for ten posts`);
  big = true;
  t.same(
    await post(),
    { outcome: 'delivered', status: 200 },
    'a huge response is cut off, not an error',
  );
});

t.test('a server that never answers times out', async (t) => {
  const srv = await startServer(t, () => {});
  const started = Date.now();
  const out = await postCallback({
    url: `${srv.base}/cb`,
    rawBody,
    headers: {},
    timeoutMs: 300,
    allowPrivate: true,
  });
  const elapsed = Date.now() - started;
  t.same(out, { outcome: 'failed', error: 'timeout after 300 ms' });
  t.ok(elapsed >= 290 && elapsed < 3000, `took ${elapsed} ms`);
  t.equal(srv.received.length, 1, 'the request itself was sent');
});

t.test(
  'a response body that never ends is cut at the deadline: the 2xx still counts',
  async (t) => {
    const srv = await startServer(t, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
    });
    const started = Date.now();
    const out = await postCallback({
      url: `${srv.base}/cb`,
      rawBody,
      headers: {},
      timeoutMs: 300,
      allowPrivate: true,
    });
    const elapsed = Date.now() - started;
    t.same(out, { outcome: 'delivered', status: 200 });
    t.ok(elapsed >= 290 && elapsed < 3000, `returned at the deadline, after ${elapsed} ms`);
  },
);

t.test(
  'a deadline that passes while the answer is read fails the post, however the wait ends',
  async (t) => {
    // Headers after the deadline: the request is aborted, not left waiting for them.
    const srv = await startServer(t, (_req, res) =>
      setTimeout(() => res.writeHead(200).end('ok'), 1_000),
    );
    const out = await postCallback({
      url: `${srv.base}/cb`,
      rawBody,
      headers: {},
      timeoutMs: 150,
      allowPrivate: true,
    });
    t.same(out, { outcome: 'failed', error: 'timeout after 150 ms' });
    // Posts after many timed-out ones still work: nothing of the deadlines is left behind.
    const ok = await startServer(t, (_req, res) => res.writeHead(204).end());
    for (let i = 0; i < 20; i++) {
      t.same(
        await postCallback({
          url: `${ok.base}/cb`,
          rawBody,
          headers: {},
          timeoutMs: 2000,
          allowPrivate: true,
        }),
        { outcome: 'delivered', status: 204 },
      );
    }
  },
);

t.test('a slow DNS answer counts against the deadline', async (t) => {
  const lookup: LookupAll = () => new Promise(() => {});
  const out = await postCallback({
    url: 'http://slow-dns.test/cb',
    rawBody,
    headers: {},
    timeoutMs: 200,
    allowPrivate: true,
    lookup,
  });
  t.same(out, { outcome: 'failed', error: 'timeout after 200 ms' });
});

t.test('connection refused fails', async (t) => {
  // Bind and release a port so nothing is listening on it.
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  const out = await postCallback({
    url: `http://127.0.0.1:${port}/cb`,
    rawBody,
    headers: {},
    timeoutMs: 5000,
    allowPrivate: true,
  });
  t.same(out, { outcome: 'failed', error: 'connect ECONNREFUSED' });
});

t.test('allowPrivate false refuses 127.0.0.1 without connecting', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end());
  for (const url of [
    `${srv.base}/cb`,
    `http://[::ffff:127.0.0.1]:${srv.port}/cb`,
    `http://localhost:${srv.port}/cb`,
  ]) {
    const out = await postCallback({
      url,
      rawBody,
      headers: {},
      timeoutMs: 2000,
      allowPrivate: false,
    });
    t.equal(out.outcome, 'failed', url);
    if (out.outcome === 'failed') {
      t.equal(out.status, undefined);
      t.match(
        out.error,
        /^callback_url host .* (is not a public address \(loopback\)|is a localhost name)$/,
      );
    }
  }
  t.equal(srv.state.connections, 0, 'no TCP connection was made');
  t.equal(srv.received.length, 0);
});

t.test('a hostname resolving to a private address is refused without connecting', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end());
  const { lookup, calls } = lookupFor({ 'evil.test': '127.0.0.1' });
  const out = await postCallback({
    url: `http://evil.test:${srv.port}/cb`,
    rawBody,
    headers: {},
    timeoutMs: 2000,
    allowPrivate: false,
    lookup,
  });
  t.match(out, { outcome: 'failed', error: /resolves to 127\.0\.0\.1/ });
  t.same(calls, ['evil.test']);
  t.equal(srv.state.connections, 0);
});

t.test('bad URLs fail without throwing', async (t) => {
  for (const url of ['ftp://example.com/', 'http://u:p@127.0.0.1/', 'nope']) {
    const out = await postCallback({
      url,
      rawBody,
      headers: {},
      timeoutMs: 1000,
      allowPrivate: true,
    });
    t.equal(out.outcome, 'failed', url);
  }
  t.match(
    await postCallback({
      url: 'http://127.0.0.1:1/',
      rawBody,
      headers: {},
      timeoutMs: 0,
      allowPrivate: true,
    }),
    {
      outcome: 'failed',
      error: /invalid timeoutMs/,
    },
  );
  t.match(
    await postCallback({
      url: 'http://127.0.0.1:1/',
      rawBody,
      headers: { 'x-bad': 'a\r\nInjected: 1' },
      timeoutMs: 1000,
      allowPrivate: true,
    }),
    { outcome: 'failed' },
    'header injection is an error outcome, not a throw',
  );
});

t.test('connects to the pinned address, keeps the Host header, resolves once', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end('ok'));
  const { lookup, calls } = lookupFor({ 'callback.test': '127.0.0.1' });
  const url = `http://callback.test:${srv.port}/cb`;
  const out = await postCallback({
    url,
    rawBody,
    headers: {},
    timeoutMs: 5000,
    allowPrivate: true,
    lookup,
  });
  t.same(out, { outcome: 'delivered', status: 200 });
  t.same(calls, ['callback.test'], 'one lookup per post: the connect does not resolve again');
  t.equal(srv.received[0]?.headers.host, `callback.test:${srv.port}`);

  // DNS now answers a different address. The next post must go there (and only there), not
  // reuse the pooled connection to the previously checked address. Nothing listens on
  // 127.0.0.2, so the post fails and the server sees no new connection or request.
  const rebound = lookupFor({ 'callback.test': '127.0.0.2' });
  const second = await postCallback({
    url,
    rawBody,
    headers: {},
    timeoutMs: 2000,
    allowPrivate: true,
    lookup: rebound.lookup,
  });
  t.equal(second.outcome, 'failed', `second post: ${JSON.stringify(second)}`);
  t.equal(srv.received.length, 1, 'no request reached the old address');
  t.equal(srv.state.connections, 1);

  // And back on the original address the pooled connection is reused.
  t.same(
    await postCallback({ url, rawBody, headers: {}, timeoutMs: 5000, allowPrivate: true, lookup }),
    {
      outcome: 'delivered',
      status: 200,
    },
  );
  t.equal(srv.state.connections, 1, 'keep-alive connection reused');
});

t.test('https keeps the original TLS servername and verifies the certificate', async (t) => {
  // Self-signed, test-only certificate for CN/SAN callback.test (valid until 2126). It is not
  // trusted, so the post must fail; that failure proves verification is on, and the server's
  // SNICallback sees the ClientHello's servername before the client rejects the certificate.
  const key = readFileSync(new URL('./fixtures/self-signed.key', import.meta.url));
  const cert = readFileSync(new URL('./fixtures/self-signed.crt', import.meta.url));
  const servernames: string[] = [];
  let requests = 0;
  const server = https.createServer(
    {
      key,
      cert,
      SNICallback: (name, cb) => {
        servernames.push(name);
        cb(null, undefined);
      },
    },
    (_req, res) => {
      requests++;
      res.end('ok');
    },
  );
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as AddressInfo;
  const { lookup, calls } = lookupFor({ 'callback.test': '127.0.0.1' });
  const out = await postCallback({
    url: `https://callback.test:${port}/cb`,
    rawBody,
    headers: {},
    timeoutMs: 5000,
    allowPrivate: true,
    lookup,
  });
  t.match(out, { outcome: 'failed', error: /SELF_SIGNED/ }, 'certificate verification is on');
  t.same(servernames, ['callback.test'], 'TLS servername is the URL hostname, not the pinned IP');
  t.same(calls, ['callback.test']);
  t.equal(requests, 0);
});

t.test('an injected dispatcher is used after the checks', async (t) => {
  const mock = new MockAgent();
  mock.disableNetConnect();
  t.teardown(() => mock.close());
  mock
    .get('https://93.184.216.34')
    .intercept({ path: '/cb', method: 'POST' })
    .reply(202, 'accepted');
  t.same(
    await postCallback({
      url: 'https://93.184.216.34/cb',
      rawBody,
      headers: {},
      timeoutMs: 1000,
      allowPrivate: false,
      dispatcher: mock,
    }),
    { outcome: 'delivered', status: 202 },
  );
  const refused = await postCallback({
    url: 'http://10.0.0.1/cb',
    rawBody,
    headers: {},
    timeoutMs: 1000,
    allowPrivate: false,
    dispatcher: mock,
  });
  t.match(
    refused,
    { outcome: 'failed', error: /private/ },
    'the guard still runs with a dispatcher',
  );
});
