import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Teardown } from './service.ts';

export interface ReceivedPost {
  headers: IncomingHttpHeaders;
  /** The exact bytes received. */
  raw: Buffer;
  at: number;
  /** The status this receiver answered with. */
  answered: number;
}

/**
 * A callback receiver on loopback. `statuses` scripts the answers in order (the last one repeats),
 * e.g. [500, 200] fails the first post and accepts the rest; or it is a function of the post's
 * bytes and the posts received before it.
 */
export async function startReceiver(
  t: Teardown,
  statuses: number[] | ((raw: Buffer, before: readonly ReceivedPost[]) => number) = [200],
): Promise<{ url: string; posts: ReceivedPost[] }> {
  const posts: ReceivedPost[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const answered =
        typeof statuses === 'function'
          ? statuses(raw, posts)
          : statuses[Math.min(posts.length, statuses.length - 1)]!;
      posts.push({ headers: req.headers, raw, at: Date.now(), answered });
      res.writeHead(answered, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/ens`, posts };
}
