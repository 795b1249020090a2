import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { EngineMissingError } from './engine-errors.ts';
import { spawnEngine } from './engine-process.ts';
import { findDirWith, pathDirs } from './find-executable.ts';
import { waitForNats } from './nats-ready.ts';
import { pollUntil } from './poll-until.ts';
import { startFailure, superviseEngine, type SupervisedEngine } from './supervised-engine.ts';

export interface StartNatsOptions {
  /** JetStream store directory; kept across restarts. */
  storeDir: string;
  /** Defaults to a free port, chosen once and kept across start() calls. */
  port?: number;
  onLog?: (line: string) => void;
  /** Directories to search instead of PATH, /usr/sbin and /usr/local/bin. */
  binDirs?: readonly string[];
  /** Default 30 s; JetStream replays its store before accepting clients. */
  startTimeoutMs?: number;
  /** Makes this server one node of a JetStream cluster (routes between nodes on loopback). */
  cluster?: NatsClusterNode;
  /** Serves the monitoring endpoints (/connz, /jsz) on this port; none when unset. */
  monitorPort?: number;
}

export interface NatsClusterNode {
  /** The cluster's name; the same on every node. */
  name: string;
  /** This node's name, unique in the cluster (JetStream requires one). */
  serverName: string;
  /** The port this node accepts routes on. */
  routePort: number;
  /** Every node's route port, this one's included. */
  routePorts: readonly number[];
}

function clusterArgs(c: NatsClusterNode): string[] {
  return [
    '--server_name',
    c.serverName,
    '--cluster_name',
    c.name,
    '--cluster',
    `nats://127.0.0.1:${c.routePort}`,
    '--routes',
    c.routePorts.map((p) => `nats://127.0.0.1:${p}`).join(','),
  ];
}

/** nats-server's notice once its route listener is bound (2.9.10, the release Debian ships). */
const ROUTES_BOUND = /Listening for route connections on /;

export interface NatsHandle extends SupervisedEngine {
  /** nats://127.0.0.1:PORT */
  readonly url: string;
}

/** nats-server lives in /usr/sbin on Debian, which is not on a normal user's PATH. */
export async function findNatsServer(binDirs?: readonly string[]): Promise<string> {
  const dirs = binDirs ?? [...pathDirs(), '/usr/sbin', '/usr/local/bin'];
  const dir = await findDirWith(dirs, ['nats-server']);
  if (!dir) {
    throw new EngineMissingError(
      'nats',
      'nats-server not found: install the "nats-server" package (apt-get install -y ' +
        'nats-server) or set NATS_URL',
      dirs,
    );
  }
  return join(dir, 'nats-server');
}

export async function startNats(opts: StartNatsOptions): Promise<NatsHandle> {
  const natsServer = await findNatsServer(opts.binDirs);
  const storeDir = resolve(opts.storeDir);
  const timeoutMs = opts.startTimeoutMs ?? 30_000;
  await mkdir(storeDir, { recursive: true });

  const engine = await superviseEngine({
    engine: 'nats',
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    stopSignal: 'SIGTERM',
    portTaken: /address already in use/i,
    async launch(port) {
      // A cluster node serves clients before it binds its route port, and exits if that port is
      // taken: greeting a client does not make it up, its own "listening for routes" line does.
      let routesBound = opts.cluster === undefined;
      const onLog = (line: string) => {
        if (!routesBound && ROUTES_BOUND.test(line)) routesBound = true;
        opts.onLog?.(line);
      };
      // No -m unless asked for: a monitoring port is one more port to collide on.
      const server = await spawnEngine({
        command: natsServer,
        args: [
          '-js',
          '-a',
          '127.0.0.1',
          '-p',
          String(port),
          '-sd',
          storeDir,
          ...(opts.cluster ? clusterArgs(opts.cluster) : []),
          ...(opts.monitorPort !== undefined ? ['-m', String(opts.monitorPort)] : []),
        ],
        parentDeathSignal: 'SIGTERM',
        onLog,
      });
      const abortIf = () => (server.isRunning() ? undefined : new Error('exited'));
      try {
        await waitForNats(port, timeoutMs, abortIf);
        await pollUntil(async () => (routesBound ? true : undefined), {
          intervalMs: 20,
          timeoutMs,
          abortIf,
        });
      } catch {
        throw await startFailure(
          'nats',
          `nats-server on port ${port}`,
          server,
          'SIGTERM',
          timeoutMs,
        );
      }
      return server;
    },
  });

  return {
    url: `nats://127.0.0.1:${engine.port}`,
    port: engine.port,
    get pid() {
      return engine.pid;
    },
    start: engine.start,
    stop: engine.stop,
    kill9: engine.kill9,
  };
}
