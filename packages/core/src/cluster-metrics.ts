import cluster from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { metricsRegistry } from './metrics.ts';
import { answerChildren, askSupervisor } from './supervisor-ipc.ts';

/*
 * With ENS_PROCESSES > 1 the api processes share one port, so a scrape of /metrics lands on any of
 * them. Each answers for the whole `ens serve`: it asks the supervising process, which gathers
 * every process's registry (prom-client's cluster aggregation) and sums counters and histograms.
 * Gauges that read one shared truth (the backlog in PostgreSQL, a provider's pace) or that flag a
 * fault (a loop or provider down) declare their own aggregator where they are defined.
 */

const CHANNEL = 'ens:metrics';
const TIMEOUT_MS = 5_000;

if (cluster.isWorker) {
  // Answers the supervisor's collection requests from this process's registry.
  AggregatorRegistry.setRegistries([metricsRegistry]);
  new AggregatorRegistry();
}

/**
 * The Prometheus text for /metrics: this process's registry, or the whole serve's under a
 * supervisor.
 */
export async function metricsText(): Promise<string> {
  if (!cluster.isWorker || !process.connected) return metricsRegistry.metrics();
  return askSupervisor<string>(CHANNEL, null, TIMEOUT_MS);
}

/** In the supervising process: answers every child's request for the aggregated metrics. */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  answerChildren(CHANNEL, () => aggregator.clusterMetrics());
}
