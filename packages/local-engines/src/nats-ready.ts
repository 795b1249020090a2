import { connect } from 'node:net';
import { pollUntil } from './poll-until.ts';

/** True once a client on `port` receives the server's INFO greeting. */
function greets(port: number): Promise<true | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let received = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok ? true : undefined);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      if (received.startsWith('INFO ')) done(true);
      else if (received.length >= 5) done(false);
    });
  });
}

export async function waitForNats(
  port: number,
  timeoutMs: number,
  abortIf: () => Error | undefined,
): Promise<void> {
  await pollUntil(() => greets(port), { intervalMs: 20, timeoutMs, abortIf });
}
