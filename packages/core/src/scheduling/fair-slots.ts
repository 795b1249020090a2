import { SlotsClosedError } from '../slots.ts';
import { FairQueue, type Flow, type FlowWeights } from './fair-queue.ts';

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * A counting semaphore whose waiters are served in fair order (see FairQueue) instead of arrival
 * order: the send slots of one channel in one worker process. A worker holds many more wake-ups
 * than it has slots, so which waiter gets the next free slot is what decides whose message goes
 * next.
 */
export class FairSlots {
  #free: number;
  #closed = false;
  readonly #waiting: FairQueue<Waiter>;

  constructor(size: number, weights?: FlowWeights) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError('size must be a positive integer');
    this.#free = size;
    this.#waiting = new FairQueue<Waiter>(weights);
  }

  /** Wake-ups waiting for a slot. */
  get waiting(): number {
    return this.#waiting.size;
  }

  /** Waiting wake-ups per client and tenant. */
  backlog(): { client: string; tenant: string; waiting: number }[] {
    return this.#waiting.backlog();
  }

  /**
   * Runs fn once a slot is free and it is `flow`'s turn, and frees the slot when fn settles.
   * `urgent` (a retry) waits at the front of its own flow. Rejects with SlotsClosedError, without
   * running fn, when the slots are closed first.
   */
  async run<T>(flow: Flow, fn: () => Promise<T>, urgent = false): Promise<T> {
    if (this.#closed) throw new SlotsClosedError();
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve, reject) => this.#waiting.push(flow, { resolve, reject }, urgent));
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      if (next) next.resolve();
      else this.#free++;
    }
  }

  /** For shutdown: holders finish, waiters and later callers get SlotsClosedError. */
  close(): void {
    this.#closed = true;
    for (let w = this.#waiting.shift(); w; w = this.#waiting.shift()) w.reject(new SlotsClosedError());
  }
}
