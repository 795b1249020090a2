import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { freePort, startNats, type NatsHandle } from '@ens/local-engines';
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
  stop(): Promise<void>;
}

/**
 * A JetStream cluster of real nats-server processes on loopback: each node with its own client
 * port, route port and store directory, routes to every other. Resolves once JetStream has a
 * meta leader, so streams can be declared at once.
 */
export async function startNatsCluster(t: { teardown(fn: () => unknown): void }, size = 3): Promise<NatsCluster> {
  const dir = await mkdtemp(join(await scratchRoot(), 'ens-nats-cluster-'));
  const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const onLog = process.env.ENS_ENGINE_LOGS ? (line: string) => process.stderr.write(`[nats] ${line}\n`) : undefined;
  const nodes = await Promise.all(
    routePorts.map((routePort, i) =>
      startNats({
        storeDir: join(dir, `n${i + 1}`),
        cluster: { name: 'ens-test', serverName: `n${i + 1}`, routePort, routePorts },
        ...(onLog ? { onLog } : {}),
      }),
    ),
  );
  const url = nodes.map((n) => n.url).join(',');
  const stop = async () => {
    await Promise.allSettled(nodes.map((n) => n.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  t.teardown(stop);
  const nc = await connect({ servers: nodes.map((n) => n.url) });
  try {
    const jsm = await jetstreamManager(nc, { checkAPI: false });
    await waitFor(async () => jsm.getAccountInfo().then(() => true, () => false), 30_000, 'the JetStream meta leader');
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
        const info = await waitFor(async () => jsm.streams.info(stream).then((i) => (i.cluster?.leader ? i : undefined), () => undefined), 30_000, `a leader for ${stream}`);
        const name = info.cluster?.leader;
        const index = Number(name?.replace(/^n/, '')) - 1;
        const node = nodes[index];
        if (!node) throw new Error(`no leader for ${stream} (${name})`);
        return node;
      } finally {
        await c.close();
      }
    },
    stop,
  };
}
