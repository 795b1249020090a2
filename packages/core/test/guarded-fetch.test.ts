import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { guardedFetch, type LookupAll } from '@ens/core';
import { closeOutboundConnections } from '@ens/core/internal';

/**
 * guardedFetch: the one way ENS reaches an address a client supplied. A name that resolves to a
 * private address is refused before any connection; the connection goes to the address that was
 * checked; a redirect is handed back, never followed.
 */
t.teardown(closeOutboundConnections);

const hits: { url: string; host: string | undefined }[] = [];
const server = createServer((req: IncomingMessage, res) => {
  hits.push({ url: req.url ?? '', host: req.headers.host });
  if (req.url === '/redirect') res.writeHead(302, { location: '/internal' }).end();
  else res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise((r) => server.close(r)));
const port = (server.address() as AddressInfo).port;
const toLoopback: LookupAll = async () => [{ address: '127.0.0.1', family: 4 }];

t.test('a name that resolves to loopback is refused, and nothing connects', async (t) => {
  const before = hits.length;
  await t.rejects(
    guardedFetch(`http://rebind.test:${port}/`, {}, { allowPrivate: false, lookup: toLoopback }),
    {
      code: 'ENS_ERR_OUTBOUND_REFUSED',
      message: /resolves to 127\.0\.0\.1/,
    },
  );
  await t.rejects(
    guardedFetch(`http://127.0.0.1:${port}/`, {}, { allowPrivate: false }),
    { code: 'ENS_ERR_OUTBOUND_REFUSED' },
    'an IP literal too',
  );
  t.equal(hits.length, before, 'the server saw no request');
});

t.test('the connection goes to the checked address, with the name as Host', async (t) => {
  const res = await guardedFetch(
    `http://pinned.test:${port}/hello`,
    {},
    { allowPrivate: true, lookup: toLoopback },
  );
  t.equal(res.status, 200);
  t.equal(await res.text(), 'ok');
  t.same(hits.at(-1), { url: '/hello', host: `pinned.test:${port}` });
});

t.test('a redirect is not followed', async (t) => {
  const before = hits.length;
  const res = await guardedFetch(
    `http://pinned.test:${port}/redirect`,
    {},
    { allowPrivate: true, lookup: toLoopback },
  );
  t.equal(res.status, 302, 'the 3xx comes back as it is');
  await res.arrayBuffer();
  t.same(
    hits.slice(before).map((h) => h.url),
    ['/redirect'],
    'the redirect target was never requested',
  );
});
