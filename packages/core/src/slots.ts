import { EnsError } from '@ens/plugin-sdk';

/** Thrown by Slots.run once the slots are closed, instead of running the function. */
export class SlotsClosedError extends EnsError {
  static override readonly code: string = 'ENS_ERR_SLOTS_CLOSED';
  constructor() {
    super('slots are closed');
  }
}

/**
 * A counting semaphore: at most `size` holders at once; others wait in arrival order. Used to
 * bound provider sends and callback posts separately from the messages a work queue holds, so
 * the database steps around them (claims, outcome records) do not take a slot.
 */
export class Slots {
  #free: number;
  #closed = false;
  readonly #waiting: { resolve: () => void; reject: (err: Error) => void }[] = [];

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError('size must be a positive integer');
    this.#free = size;
  }

  /**
   * Runs fn once a slot is free, and frees the slot when fn settles. Rejects with
   * SlotsClosedError, without running fn, when the slots are closed before a slot is free.
   */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new SlotsClosedError();
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve, reject) => this.#waiting.push({ resolve, reject }));
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
    for (const w of this.#waiting.splice(0)) w.reject(new SlotsClosedError());
  }
}
