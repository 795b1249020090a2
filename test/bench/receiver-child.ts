/**
 * The callback receiver, run as its own process (forked by callbacks.ts) so that in both the raw
 * loop and the ENS runs the poster and the receiver sit in different processes. It answers every
 * POST with 200 and reports over IPC when it has seen the number of posts it was told to expect.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

type Msg = { type: 'expect'; n: number } | { type: 'stats' };

const now = () => performance.timeOrigin + performance.now();
let expected = 0;
let count = 0;
let first = 0;
let last = 0;
let signed = 0;
let bodyBytes = 0;

const stats = () => ({ count, first, last, signed, bodyBytes });

const server = createServer((req, res) => {
  let size = 0;
  req.on('data', (c: Buffer) => (size += c.length));
  req.on('end', () => {
    const t = now();
    if (count === 0) first = t;
    count++;
    last = t;
    bodyBytes += size;
    if (req.headers['x-ens-signature'] && req.headers['webhook-signature']) signed++;
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    if (expected > 0 && count === expected) process.send!({ type: 'done', ...stats() });
  });
});
server.keepAliveTimeout = 60_000;

process.on('message', (m: Msg) => {
  if (m.type === 'expect') {
    expected = m.n;
    count = 0;
    first = 0;
    last = 0;
    signed = 0;
    bodyBytes = 0;
    process.send!({ type: 'armed' });
  } else if (m.type === 'stats') {
    process.send!({ type: 'stats', ...stats() });
  }
});
process.on('disconnect', () => process.exit(0));
server.listen(0, '127.0.0.1', () =>
  process.send!({ type: 'listening', port: (server.address() as AddressInfo).port }),
);
