import { createServer } from 'node:net';

/**
 * Asks the kernel for an unused port on 127.0.0.1. The port is released before
 * returning, so a caller that loses the race to another process must retry.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close((err) => {
        if (err) reject(err);
        else if (port === 0) reject(new Error('the OS did not assign a TCP port'));
        else resolve(port);
      });
    });
  });
}
