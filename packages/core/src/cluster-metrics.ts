import cluster from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { metricsRegistry } from './metrics.ts';

/*
 * With ENS_PROCESSES > 1 the api processes share one port, so a scrape of /metrics lands on any of
 * them. Each answers for the whole `ens serve`: it asks the supervising process, which gathers
 * every process's registry (prom-client's cluster aggregation) and sums counters and histograms.
 * Gauges that read one shared truth (the backlog in PostgreSQL, a provider's pace) or that flag a
 * fault (a loop or provider down) declare their own aggregator where they are defined.
 */

const ASK = 'ens:metrics?';
const ANSWER = 'ens:metrics!';
const TIMEOUT_MS = 5_000;

interface Answer {
  type: typeof ANSWER;
  id: number;
  text?: string;
  error?: string;
}

let nextId = 0;
const waiting = new Map<number, { resolve: (text: string) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();

if (cluster.isWorker) {
  // Answers the supervisor's collection requests from this process's registry.
  AggregatorRegistry.setRegistries([metricsRegistry]);
  new AggregatorRegistry();
  process.on('message', (m: Answer) => {
    if (m?.type !== ANSWER) return;
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    clearTimeout(w.timer);
    if (m.error !== undefined) w.reject(new Error(m.error));
    else w.resolve(m.text ?? '');
  });
}

/** The Prometheus text for /metrics: this process's registry, or the whole serve's under a supervisor. */
export async function metricsText(): Promise<string> {
  if (!cluster.isWorker || !process.connected) return metricsRegistry.metrics();
  const id = nextId++;
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      waiting.delete(id);
      reject(new Error(`the supervising process did not gather the metrics within ${TIMEOUT_MS} ms`));
    }, TIMEOUT_MS);
    waiting.set(id, { resolve, reject, timer });
    process.send!({ type: ASK, id });
  });
}

/** In the supervising process: answers every child's request for the aggregated metrics. */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, m: { type?: string; id?: number }) => {
    if (m?.type !== ASK || typeof m.id !== 'number') return;
    const id = m.id;
    aggregator.clusterMetrics().then(
      (text) => worker.isConnected() && worker.send({ type: ANSWER, id, text } satisfies Answer),
      (e: Error) => worker.isConnected() && worker.send({ type: ANSWER, id, error: e.message } satisfies Answer),
    );
  });
}
