import { FairQueue, type Flow, type FlowWeights } from './fair-queue.ts';

/**
 * What the slots do with an item: start it when it gets a slot, or cancel it when they close first.
 */
export interface SlotWork<T> {
  /** Runs the item; its slot is free again when the promise settles. */
  start(item: T): Promise<unknown>;
  /** The slots closed while the item waited: it never started. */
  cancel(item: T): void;
}

/**
 * A counting semaphore whose waiting items are served in fair order (see FairQueue) instead of
 * arrival order: the send slots of one channel in one worker process. A worker holds many more
 * wake-ups than it has slots, so which one gets the next free slot is what decides whose message
 * goes next. A waiting item is just the item in a queue (no promise, no suspended function), since
 * a worker may hold a hundred thousand of them.
 */
export class FairSlots<T> {
  #free: number;
  #closed = false;
  readonly #waiting: FairQueue<T>;

  constructor(
    size: number,
    private readonly work: SlotWork<T>,
    weights?: FlowWeights,
  ) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError('size must be a positive integer');
    this.#free = size;
    this.#waiting = new FairQueue<T>(weights);
  }

  /** Items waiting for a slot. */
  get waiting(): number {
    return this.#waiting.size;
  }

  /** Waiting items per client and tenant. */
  backlog(): { client: string; tenant: string; waiting: number }[] {
    return this.#waiting.backlog();
  }

  /** Every waiting item, in no particular order. */
  items(): IterableIterator<T> {
    return this.#waiting.items();
  }

  /**
   * Starts the item now if a slot is free; otherwise it waits in `flow` (at the front of it when
   * `urgent`, a retry) for its turn. After close, the item is cancelled at once.
   */
  submit(flow: Flow, item: T, urgent = false): void {
    if (this.#closed) {
      this.work.cancel(item);
      return;
    }
    if (this.#free > 0) {
      this.#free--;
      this.#start(item);
    } else {
      this.#waiting.push(flow, item, urgent);
    }
  }

  #start(item: T): void {
    const release = () => {
      const next = this.#closed ? undefined : this.#waiting.shift();
      if (next === undefined) this.#free++;
      else this.#start(next);
    };
    // start() owns the item's errors; a throw here only frees the slot.
    Promise.resolve()
      .then(() => this.work.start(item))
      .then(release, release);
  }

  /** For shutdown: items under way finish, waiting and later items are cancelled. */
  close(): void {
    this.#closed = true;
    for (let item = this.#waiting.shift(); item !== undefined; item = this.#waiting.shift())
      this.work.cancel(item);
  }
}
