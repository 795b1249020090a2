import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup } from '../cleanup.ts';
import { spawnNode } from '../ens.ts';
import { progress } from '../log.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));

export type PeerKind = 'fastify-pg' | 'graphile-worker' | 'bullmq';

export interface PeerChild {
  name: string;
  pid: number;
  baseUrl: string;
  /** SIGTERM (the peer finishes in-flight jobs and closes its pools), SIGKILL after 15 s. */
  stop(): Promise<void>;
}

/**
 * Starts a peer as its own Node process (like ENS's child, so diagnostics.ts can split the CPU by
 * process) and waits for it to report its port over IPC.
 */
export async function startPeer(
  kind: PeerKind,
  name: string,
  env: Record<string, string>,
): Promise<PeerChild> {
  const child: ChildProcess = await spawnNode(
    ['--import=tsx', path.join(HERE, `${kind}.ts`)],
    env,
    'ipc',
  );
  const tail: string[] = [];
  child.stderr!.on('data', (d: Buffer) => {
    const text = d.toString();
    tail.push(text);
    if (tail.length > 20) tail.shift();
    process.stderr.write(`[${name}] ${text}`);
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  const stop = onCleanup(`peer ${name}`, async () => {
    if (hasExited) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(t);
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`peer ${name} not ready after 60 s:\n${tail.join('')}`)),
      60_000,
    );
    child.on('message', (m: { type: string; port: number }) => {
      if (m.type !== 'ready') return;
      clearTimeout(timer);
      resolve(m.port);
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`peer ${name} exited (${code}) during start-up:\n${tail.join('')}`));
    });
  }).catch(async (err: unknown) => {
    await stop();
    throw err;
  });
  progress(`peer "${name}" (pid ${child.pid}) ready at http://127.0.0.1:${port}`);
  return { name, pid: child.pid!, baseUrl: `http://127.0.0.1:${port}`, stop };
}
