/**
 * A counting semaphore: at most `size` holders at once; others wait in arrival order. Used to
 * bound provider sends and callback posts separately from the messages a work queue holds, so
 * the database steps around them (claims, outcome records) do not take a slot.
 */
export class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError('size must be a positive integer');
    this.#free = size;
  }

  /** Runs fn once a slot is free, and frees the slot when fn settles. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    }
  }
}
