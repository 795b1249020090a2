import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { EngineStartError, freePort, startNats, type NatsHandle } from '@ens/local-engines';
import { scratchRoot } from './scratch-root.ts';
import { waitFor } from './service.ts';

export interface NatsCluster {
  nodes: NatsHandle[];
  /** Holds each node's store, `n1`, `n2`, … */
  dir: string;
  /** Every node's client URL, comma-separated, as NATS_URL takes it. */
  url: string;
  /** The node that leads `stream` now. */
  leaderOf(stream: string): Promise<NatsHandle>;
  /**
   * The client connections node i (from 0) holds now whose name is `name` (ENS names its
   * connections `ens`), read from its monitoring port; null when the node does not answer.
   */
  connectionsOn(i: number, name: string): Promise<number | null>;
  /**
   * Waits until JetStream has a meta leader and every stream and consumer has a leader and all its
   * replicas current (a node that came back has caught up); resolves with the milliseconds it took.
   * Rejects after `timeoutMs` naming what was still behind.
   */
  caughtUp(timeoutMs: number): Promise<number>;
  stop(): Promise<void>;
}

/** How many times a cluster start is tried afresh when a port it picked was taken meanwhile. */
const CLUSTER_PORT_ATTEMPTS = 4;

export interface NatsClusterOptions {
  /** Where each route and monitoring port comes from; a test swaps it to take one first. */
  pickPort?: () => Promise<number>;
}

/**
 * A JetStream cluster of real nats-server processes on loopback: each node with its own client
 * port, route port and store directory, routes to every other. Resolves once JetStream has a
 * meta leader and every node has joined it, so streams can be declared at once.
 */
export async function startNatsCluster(
  t: { teardown(fn: () => unknown): void },
  size = 3,
  opts: NatsClusterOptions = {},
): Promise<NatsCluster> {
  const dir = await mkdtemp(join(await scratchRoot(), 'ens-nats-cluster-'));
  const started = await startNodes(dir, size, opts.pickPort ?? freePort).catch(async (err) => {
    await rm(dir, { recursive: true, force: true });
    throw err;
  });
  const { nodes, monitorPorts } = started;
  const url = nodes.map((n) => n.url).join(',');
  const stop = async () => {
    await Promise.allSettled(nodes.map((n) => n.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  t.teardown(stop);
  const nc = await connect({ servers: nodes.map((n) => n.url) });
  try {
    const jsm = await jetstreamManager(nc, { checkAPI: false });
    await waitFor(
      async () =>
        jsm.getAccountInfo().then(
          () => true,
          () => false,
        ),
      30_000,
      'the JetStream meta leader',
    );
    // A meta leader can answer before every node has joined it; a stream on all of them can then be
    // refused (CI saw ENS's first stream declaration fail so). A probe stream on every node proves
    // they all have.
    const probe = `ENS_TEST_PROBE_${process.pid}`;
    await waitFor(
      async () =>
        jsm.streams
          .add({ name: probe, subjects: [`ens.test.probe.${process.pid}`], num_replicas: size })
          .then(
            () => true,
            () => false,
          ),
      30_000,
      `a stream on all ${size} nodes`,
    );
    await jsm.streams.delete(probe);
  } finally {
    await nc.close();
  }
  return {
    nodes,
    dir,
    url,
    async leaderOf(stream) {
      const c = await connect({ servers: nodes.map((n) => n.url) });
      try {
        // Right after a node came back the cluster may still be electing: ask until it answers.
        const jsm = await jetstreamManager(c, { checkAPI: false });
        const info = await waitFor(
          async () =>
            jsm.streams.info(stream).then(
              (i) => (i.cluster?.leader ? i : undefined),
              () => undefined,
            ),
          30_000,
          `a leader for ${stream}`,
        );
        const name = info.cluster?.leader;
        const index = Number(name?.replace(/^n/, '')) - 1;
        const node = nodes[index];
        if (!node) throw new Error(`no leader for ${stream} (${name})`);
        return node;
      } finally {
        await c.close();
      }
    },
    async connectionsOn(i, name) {
      try {
        const r = await fetch(`http://127.0.0.1:${monitorPorts[i]}/connz?limit=10000`, {
          signal: AbortSignal.timeout(2_000),
        });
        const body = (await r.json()) as { connections?: { name?: string }[] };
        return (body.connections ?? []).filter((c) => c.name === name).length;
      } catch {
        return null;
      }
    },
    async caughtUp(timeoutMs) {
      const started = Date.now();
      const c = await connect({ servers: nodes.map((n) => n.url), maxReconnectAttempts: -1 });
      try {
        const jsm = await jetstreamManager(c, { checkAPI: false });
        for (;;) {
          const behind = await lagging(jsm).catch(
            (err: unknown) => `JetStream (${(err as Error).message})`,
          );
          if (!behind) return Date.now() - started;
          if (Date.now() - started > timeoutMs)
            throw new Error(`the NATS cluster has not caught up after ${timeoutMs} ms: ${behind}`);
          await new Promise((r) => setTimeout(r, 250));
        }
      } finally {
        await c.close();
      }
    },
    stop,
  };
}

type ClusterInfo =
  | { leader?: string; replicas?: { name: string; current: boolean; offline?: boolean }[] }
  | undefined;

/** What is not caught up in one group's cluster info, or '' when it is. */
function groupBehind(what: string, cluster: ClusterInfo): string {
  if (!cluster?.leader) return `${what} has no leader`;
  const late = (cluster.replicas ?? []).filter((r) => !r.current || r.offline).map((r) => r.name);
  return late.length ? `${what} replicas ${late.join(', ')} are not current` : '';
}

/** The first stream or consumer that is not caught up, or '' when all are. */
async function lagging(jsm: Awaited<ReturnType<typeof jetstreamManager>>): Promise<string> {
  await jsm.getAccountInfo();
  for await (const s of jsm.streams.list()) {
    const behind = groupBehind(`stream ${s.config.name}`, s.cluster);
    if (behind) return behind;
    for await (const ci of jsm.consumers.list(s.config.name)) {
      const b = groupBehind(`consumer ${s.config.name}/${ci.name}`, ci.cluster);
      if (b) return b;
    }
  }
  return '';
}

/*
 * The route and monitoring ports are picked before any node starts, and every node is told all
 * the route ports, so one taken meanwhile (freePort's window: another test file's engine bound it
 * first) cannot be swapped for one node alone: the whole cluster starts again on new ports. A
 * start that fails stops the nodes that did start; left running, they kept the test file alive
 * until tap's timeout (seen at --jobs=3: a route port taken, then 240 s of nothing).
 */
async function startNodes(
  dir: string,
  size: number,
  pickPort: () => Promise<number>,
): Promise<{ nodes: NatsHandle[]; monitorPorts: number[] }> {
  const onLog = process.env.ENS_ENGINE_LOGS
    ? (line: string) => process.stderr.write(`[nats] ${line}\n`)
    : undefined;
  for (let attempt = 1; ; attempt++) {
    // Distinct: the kernel may hand a released port out again at once.
    const picked = new Set<number>();
    const pick = async (): Promise<number> => {
      for (;;) {
        const port = await pickPort();
        if (picked.has(port)) continue;
        picked.add(port);
        return port;
      }
    };
    const routePorts: number[] = [];
    const monitorPorts: number[] = [];
    for (let i = 0; i < size; i++) routePorts.push(await pick());
    for (let i = 0; i < size; i++) monitorPorts.push(await pick());
    const started = await Promise.allSettled(
      routePorts.map((routePort, i) =>
        startNats({
          storeDir: join(dir, `n${i + 1}`),
          cluster: { name: 'ens-test', serverName: `n${i + 1}`, routePort, routePorts },
          monitorPort: monitorPorts[i]!,
          ...(onLog ? { onLog } : {}),
        }),
      ),
    );
    const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failure = started.find((r) => r.status === 'rejected')?.reason as unknown;
    if (failure === undefined) return { nodes, monitorPorts };
    await Promise.allSettled(nodes.map((n) => n.stop()));
    const portTaken =
      failure instanceof EngineStartError && /address already in use/i.test(failure.output);
    if (!portTaken || attempt >= CLUSTER_PORT_ATTEMPTS) throw failure;
    await rm(dir, { recursive: true, force: true });
  }
}
