import { Gauge } from 'prom-client';
import { metricsRegistry } from '../metrics.ts';

/*
 * Every loop that takes work (each channel's sends, the callbacks, the feed stamper) reports here
 * whether it is taking work now. A loop that stopped is the failure that hides best: the API keeps
 * answering 202 and the work waits, durable but unseen. /readyz and ens_consumer_up read this
 * registry, so a stopped loop is seen from the outside within one probe.
 */

export const consumerUp = new Gauge({
  name: 'ens_consumer_up',
  help:
    '1 while the loop takes work from its stream and consumer, 0 while it is down and being ' +
    'restarted',
  labelNames: ['stream', 'consumer'],
  registers: [metricsRegistry],
  // Across the processes of one serve: 0 when the loop is down in any of them.
  aggregator: 'min',
});

export interface LoopState {
  readonly stream: string;
  readonly consumer: string;
  up: boolean;
  /** Why the loop is down, for /readyz; null while up. */
  reason: string | null;
  /** When the loop last changed between up and down. */
  since: Date;
}

const loops = new Map<string, LoopState>();
const keyOf = (stream: string, consumer: string) => `${stream}/${consumer}`;

export interface LoopHealth {
  up(): void;
  down(reason: string): void;
  /** Forgets the loop when its role stops: a stopped role is not a stopped loop. */
  remove(): void;
}

/** Registers a loop, initially down until it says it took work. */
export function registerLoop(stream: string, consumer: string): LoopHealth {
  const state: LoopState = { stream, consumer, up: false, reason: 'starting', since: new Date() };
  const key = keyOf(stream, consumer);
  loops.set(key, state);
  consumerUp.set({ stream, consumer }, 0);
  const set = (up: boolean, reason: string | null) => {
    if (loops.get(key) !== state) return;
    if (state.up !== up) state.since = new Date();
    state.up = up;
    state.reason = reason;
    consumerUp.set({ stream, consumer }, up ? 1 : 0);
  };
  return {
    up: () => set(true, null),
    down: (reason) => set(false, reason),
    remove() {
      if (loops.get(key) !== state) return;
      loops.delete(key);
      consumerUp.remove({ stream, consumer });
    },
  };
}

/** The loops of this process that are not taking work, named `stream/consumer`. */
export function downLoops(): { name: string; reason: string; sinceMs: number }[] {
  const now = Date.now();
  return [...loops.entries()]
    .filter(([, s]) => !s.up)
    .map(([name, s]) => ({ name, reason: s.reason ?? 'down', sinceMs: now - s.since.getTime() }));
}

/** Every loop this process runs, for the console and tests. */
export function allLoops(): readonly LoopState[] {
  return [...loops.values()];
}
