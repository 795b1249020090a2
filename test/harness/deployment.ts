import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@ens/local-engines';
import { ENS_ARGV } from './ens-process.ts';
import type { Teardown } from './service.ts';

/**
 * A multi-process deployment, as platform teams run ENS: separate `ens serve --roles …` processes
 * (from source, as `npx ens` runs) against one PostgreSQL and one NATS (or a cluster). Each
 * process can be killed with kill -9 and started again on its ports.
 */

export type RoleName = 'api' | 'worker' | 'callbacks' | 'feed';

export interface EnsNode {
  name: string;
  role: RoleName;
  /** The port serving /readyz: PORT for api, ENS_HEALTH_PORT for the others. */
  port: number;
  running(): boolean;
  /** The process id while it runs. */
  pid(): number | undefined;
  start(): Promise<void>;
  kill9(): Promise<void>;
  /** SIGTERM, waiting for the process to exit. */
  stop(): Promise<void>;
  output(): string;
}

export interface Deployment {
  nodes: EnsNode[];
  /**
   * Environment shared by every process, for running `ens` commands against the same deployment.
   */
  env: Record<string, string>;
  apiUrls(): string[];
  stop(): Promise<void>;
}

async function ready(port: number): Promise<boolean> {
  try {
    return (
      (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) }))
        .status === 200
    );
  } catch {
    return false;
  }
}

export async function waitReady(node: EnsNode, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await ready(node.port))) {
    if (Date.now() > until)
      throw new Error(
        `${node.name} not ready within ${timeoutMs} ms:\n${node.output().slice(-2000)}`,
      );
    if (!node.running()) throw new Error(`${node.name} exited:\n${node.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startDeployment(
  t: Teardown,
  opts: {
    databaseUrl: string;
    natsUrl: string;
    counts: Record<RoleName, number>;
    env?: Record<string, string>;
    /** Each process's output is also appended to `<logDir>/<name>.log`, across its restarts. */
    logDir?: string;
  },
): Promise<Deployment> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ens-deploy-'));
  const env: Record<string, string> = {
    DATABASE_URL: opts.databaseUrl,
    NATS_URL: opts.natsUrl,
    ENS_DATA_DIR: dataDir,
    // Every process must hold the same key (a generated one lives in one data dir only).
    ENS_MASTER_KEY: randomBytes(32).toString('base64'),
    HOST: '127.0.0.1',
    ENS_LOG_LEVEL: 'warn',
    // Each node is one process: the deployment's shape is the roles and counts given here.
    ENS_PROCESSES: '1',
    ENS_ALLOW_PRIVATE_CALLBACKS: 'true',
    ENS_RATE_LIMIT: '100000',
    ENS_TOKEN_RATE_LIMIT: '100000',
    ...opts.env,
  };
  const nodes: EnsNode[] = [];
  for (const role of ['feed', 'callbacks', 'worker', 'api'] as const) {
    for (let i = 1; i <= opts.counts[role]; i++) {
      const port = await freePort();
      const portEnv =
        role === 'api' ? { PORT: String(port) } : { PORT: '0', ENS_HEALTH_PORT: String(port) };
      let child: ChildProcess | null = null;
      let out = '';
      let exited: Promise<void> = Promise.resolve();
      const node: EnsNode = {
        name: `${role}${i}`,
        role,
        port,
        running: () => child !== null && child.exitCode === null && child.signalCode === null,
        pid: () => (node.running() ? child!.pid : undefined),
        async start() {
          if (node.running()) return;
          const c = spawn(process.execPath, [...ENS_ARGV, 'serve', '--roles', role], {
            env: { ...process.env, ...env, ...portEnv },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          child = c;
          const log = opts.logDir
            ? createWriteStream(join(opts.logDir, `${role}${i}.log`), { flags: 'a' })
            : null;
          const take = (d: Buffer) => {
            out = (out + d.toString()).slice(-20_000);
            log?.write(d);
          };
          c.stdout!.on('data', take);
          c.stderr!.on('data', take);
          c.once('exit', () => log?.end());
          exited = new Promise((r) => c.once('exit', () => r()));
          await waitReady(node);
        },
        async kill9() {
          if (!node.running()) return;
          child!.kill('SIGKILL');
          await exited;
        },
        async stop() {
          if (!node.running()) return;
          child!.kill('SIGTERM');
          await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
          if (node.running()) await node.kill9();
        },
        output: () => out,
      };
      nodes.push(node);
    }
  }
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.kill9()));
    await rm(dataDir, { recursive: true, force: true });
  };
  t.teardown(stop);
  // One migrate first, so the processes do not all wait on the migration lock at once.
  await new Promise<void>((resolve, reject) => {
    const m = spawn(process.execPath, [...ENS_ARGV, 'migrate'], {
      env: { ...process.env, ...env },
      stdio: 'ignore',
    });
    m.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`ens migrate exited ${code}`)),
    );
  });
  for (const n of nodes) await n.start();
  return {
    nodes,
    env,
    stop,
    apiUrls: () =>
      nodes.filter((n) => n.role === 'api' && n.running()).map((n) => `http://127.0.0.1:${n.port}`),
  };
}
