/**
 * Coalesces single-item calls into batch calls. Calls that arrive while every batch slot is busy
 * queue, and go together (up to `maxBatch` of them, and up to `maxWeight` if set) as one call as
 * soon as a slot frees. No timer is involved, so an idle system adds no delay and a busy one pays
 * one round trip for many callers.
 *
 * `run` gets the queued inputs in arrival order and must return one output per input, in the same
 * order. If it throws (or returns the wrong number of outputs), every caller of that batch gets the
 * error; callers of other batches are not affected. With `isolate`, a batch that fails as a whole
 * is first tried again input by input, so only the input at fault fails.
 */
export interface CoalescerOptions<I = unknown> {
  /** Most inputs handed to one `run` call. */
  maxBatch: number;
  /** Most `run` calls in flight at once (default 1). */
  maxInFlight?: number;
  /**
   * When a call that finds a free slot goes. `now` (the default): before `call()` returns, on its
   * own. `end-of-turn`: at the end of the current event-loop turn, together with the other calls
   * made in that turn; for a statement that is costly to run for one input but cheap per extra one.
   */
  flush?: 'now' | 'end-of-turn';
  /** Each input's weight (say, rows it writes), for `maxWeight`. */
  weight?: (input: I) => number;
  /** Most total weight in one batch; an input heavier than this goes alone. */
  maxWeight?: number;
  /**
   * Says whether a failed batch of several inputs should be split: each of its inputs then runs
   * again alone, ahead of what is queued, and its caller gets that run's result or error. For
   * failures that one bad input causes (a value the database refuses), not for lost connections.
   */
  isolate?: (err: unknown) => boolean;
}

interface Waiter<I, O> {
  input: I;
  resolve: (out: O) => void;
  reject: (err: unknown) => void;
  /** Runs in a batch of its own (its batch failed as a whole and was split). */
  alone: boolean;
}

export class Coalescer<I, O> {
  readonly #run: (inputs: I[]) => Promise<O[]>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #endOfTurn: boolean;
  readonly #weight: ((input: I) => number) | undefined;
  readonly #maxWeight: number;
  readonly #isolate: ((err: unknown) => boolean) | undefined;
  #queue: Waiter<I, O>[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(run: (inputs: I[]) => Promise<O[]>, opts: CoalescerOptions<I>) {
    if (!Number.isInteger(opts.maxBatch) || opts.maxBatch < 1)
      throw new RangeError('maxBatch must be a positive integer');
    const maxInFlight = opts.maxInFlight ?? 1;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1)
      throw new RangeError('maxInFlight must be a positive integer');
    if (opts.maxWeight !== undefined && !(opts.maxWeight > 0))
      throw new RangeError('maxWeight must be positive');
    this.#run = run;
    this.#maxBatch = opts.maxBatch;
    this.#maxInFlight = maxInFlight;
    this.#endOfTurn = opts.flush === 'end-of-turn';
    this.#weight = opts.maxWeight === undefined ? undefined : opts.weight;
    this.#maxWeight = opts.maxWeight ?? Infinity;
    this.#isolate = opts.isolate;
  }

  /** Calls waiting for a slot (not counting those in flight). */
  get queued(): number {
    return this.#queue.length;
  }

  call(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ input, resolve, reject, alone: false });
      if (this.#endOfTurn) this.#schedule();
      else this.#pump();
    });
  }

  /** Pumps at the end of this event-loop turn, if a slot is free; otherwise a batch ending will. */
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const batch = this.#take();
      this.#inFlight++;
      void this.#dispatch(batch);
    }
  }

  /** The next batch: queued calls in arrival order, within the limits; a split one by itself. */
  #take(): Waiter<I, O>[] {
    if (this.#queue[0]!.alone) return this.#queue.splice(0, 1);
    let n = 0;
    let weight = 0;
    while (n < this.#queue.length && n < this.#maxBatch) {
      const w = this.#queue[n]!;
      if (w.alone) break;
      if (this.#weight) weight += this.#weight(w.input);
      if (n > 0 && weight > this.#maxWeight) break;
      n++;
    }
    return this.#queue.splice(0, n);
  }

  async #dispatch(batch: Waiter<I, O>[]): Promise<void> {
    let outputs: O[] | undefined;
    let error: unknown;
    let failed = false;
    try {
      outputs = await this.#run(batch.map((w) => w.input));
      if (!Array.isArray(outputs) || outputs.length !== batch.length) {
        throw new Error(
          `batch call returned ${Array.isArray(outputs) ? outputs.length : typeof outputs} results for ${batch.length} inputs`,
        );
      }
    } catch (err) {
      failed = true;
      error = err;
    }
    this.#inFlight--;
    if (failed && batch.length > 1 && this.#isolate?.(error)) {
      for (const w of batch) w.alone = true;
      this.#queue.unshift(...batch);
    } else if (failed) {
      for (const w of batch) w.reject(error);
    } else {
      for (let i = 0; i < batch.length; i++) batch[i]!.resolve(outputs![i]!);
    }
    this.#pump();
  }
}
