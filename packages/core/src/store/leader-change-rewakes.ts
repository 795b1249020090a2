import type { Logger } from 'pino';
import { leaderChangeRewoken } from '../metrics.ts';
import { ACK_WAIT_MS } from '../nats/topology.ts';

/*
 * A retry is a nak with a delay. When a consumer's JetStream leader steps down just after it
 * answered a nak but before the nak's delay was replicated, the new leader holds the message as
 * delivered and brings it back only after the ack wait; heard-nak.ts cannot tell, as the nak was
 * answered. The soak saw 3 of 1,372 retries wait for the sweeper (ENS_SWEEP_GRACE, ~30 s) so.
 *
 * So when a consume loop sees its consumer elect a leader, its store looks in PostgreSQL for the
 * rows such a nak can belong to, and wakes each one that is still waiting shortly after it is due.
 * It depends on no NATS timing, and costs nothing while no leader moves:
 * - a plan, at the leader change: the pending, unleased rows due from LOOKBACK_MS before it (a nak
 *   answered during the election, with a short delay) to ACK_WAIT_MS after it. A row due later is
 *   redelivered before it is due, and the claim's 'not_due' miss naks it again to its due time.
 *   Two range reads of the due index, each with a LIMIT; ids and due times are all it keeps.
 * - a pass per second of due times, SLACK_MS after the bucket ends: the planned rows still pending,
 *   due and unleased then (by primary key) are woken. A retry whose nak was heard has been claimed
 *   by then and is left alone; a wake-up too many is harmless (its claim misses on 'leased').
 * No row is written. A later leader change of the same key (the other lane, another step-down)
 * replaces the plan: its own range covers what was still to come.
 */

/** How far before a leader change a row may be due and still be waiting on a nak it lost. */
export const LOOKBACK_MS = 15_000;
/** How far after a leader change a lost nak's row may be due (see above). */
export const HORIZON_MS = ACK_WAIT_MS;
/** Rows planned at most, each side of the leader change. */
export const PLAN_LIMIT = 1000;
/** Due times are grouped by this much, a pass each. */
const BUCKET_MS = 1000;
/** How long after its due time a row is given to be claimed through its own nak first. */
const SLACK_MS = 1000;

/** A row a leader change may have left without its wake-up. */
export interface PlannedRow {
  id: string;
  /** Milliseconds until it is due (negative: due already). */
  dueInMs: number;
}

export interface LeaderChangeRewakesOptions<K> {
  /** The rows of `key` a leader change may have left waiting (see above). */
  plan(key: K): Promise<PlannedRow[]>;
  /** Wakes those of `ids` still pending, due and unleased; returns how many it woke. */
  pass(key: K, ids: string[]): Promise<number>;
  logger: Logger | null;
  /** What is woken: the metric's label and the log's word. */
  kind: 'delivery' | 'callback';
}

/** The plans of one store's keys (channels, or the one callbacks consumer). */
export class LeaderChangeRewakes<K extends string> {
  readonly #plans = new Map<K, { generation: number; timers: NodeJS.Timeout[] }>();
  #generation = 0;

  constructor(private readonly opts: LeaderChangeRewakesOptions<K>) {}

  get #what(): string {
    return this.opts.kind === 'delivery' ? 'deliveries' : 'callbacks';
  }

  /** Plans the passes for `key`'s rows after its consumer elected a leader. Never throws. */
  afterLeaderChange(key: K): void {
    const generation = ++this.#generation;
    this.opts.plan(key).then(
      (rows) => this.#schedule(key, generation, rows),
      (err: unknown) =>
        this.opts.logger?.warn(
          { err, key },
          `could not look for ${this.#what} a leader change may have left waiting; ` +
            'the sweeper will find them',
        ),
    );
  }

  #schedule(key: K, generation: number, rows: PlannedRow[]): void {
    const previous = this.#plans.get(key);
    // A plan made for a later leader change of the same key already covers this one's range.
    if (previous && previous.generation > generation) return;
    for (const t of previous?.timers ?? []) clearTimeout(t);
    const buckets = new Map<number, string[]>();
    for (const r of rows) {
      const at = Math.max(0, Math.ceil(r.dueInMs / BUCKET_MS) * BUCKET_MS);
      const ids = buckets.get(at);
      if (ids) ids.push(r.id);
      else buckets.set(at, [r.id]);
    }
    const timers = [...buckets].map(([at, ids]) => {
      const t = setTimeout(() => this.#pass(key, ids), at + SLACK_MS);
      t.unref();
      return t;
    });
    this.#plans.set(key, { generation, timers });
  }

  #pass(key: K, ids: string[]): void {
    this.opts.pass(key, ids).then(
      (woken) => {
        if (woken === 0) return;
        leaderChangeRewoken.inc({ kind: this.opts.kind }, woken);
        this.opts.logger?.info(
          { key, woken, planned: ids.length },
          `woke ${this.#what} still waiting after their due time since a leader change`,
        );
      },
      (err: unknown) =>
        this.opts.logger?.debug(
          { err, key },
          `could not wake ${this.#what} after a leader change; the sweeper will`,
        ),
    );
  }
}
