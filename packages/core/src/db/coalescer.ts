/**
 * Coalesces single-item calls into batch calls. The first call that arrives while nothing is in
 * flight goes at once, on its own; calls that arrive while batches are in flight queue, and go
 * together (up to `maxBatch` of them) as one call as soon as a slot frees. No timer is involved, so
 * an idle system adds no delay and a busy one pays one round trip for many callers.
 *
 * `run` gets the queued inputs in arrival order and must return one output per input, in the same
 * order. If it throws (or returns the wrong number of outputs), every caller of that batch gets the
 * error; callers of other batches are not affected.
 */
export interface CoalescerOptions {
  /** Most inputs handed to one `run` call. */
  maxBatch: number;
  /** Most `run` calls in flight at once (default 1). */
  maxInFlight?: number;
}

interface Waiter<I, O> {
  input: I;
  resolve: (out: O) => void;
  reject: (err: unknown) => void;
}

export class Coalescer<I, O> {
  readonly #run: (inputs: I[]) => Promise<O[]>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  #queue: Waiter<I, O>[] = [];
  #inFlight = 0;

  constructor(run: (inputs: I[]) => Promise<O[]>, opts: CoalescerOptions) {
    if (!Number.isInteger(opts.maxBatch) || opts.maxBatch < 1) throw new RangeError('maxBatch must be a positive integer');
    const maxInFlight = opts.maxInFlight ?? 1;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) throw new RangeError('maxInFlight must be a positive integer');
    this.#run = run;
    this.#maxBatch = opts.maxBatch;
    this.#maxInFlight = maxInFlight;
  }

  /** Calls waiting for a slot (not counting those in flight). */
  get queued(): number {
    return this.#queue.length;
  }

  call(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ input, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const batch = this.#queue.length <= this.#maxBatch ? this.#queue : this.#queue.slice(0, this.#maxBatch);
      this.#queue = batch === this.#queue ? [] : this.#queue.slice(this.#maxBatch);
      this.#inFlight++;
      void this.#dispatch(batch);
    }
  }

  async #dispatch(batch: Waiter<I, O>[]): Promise<void> {
    try {
      const outputs = await this.#run(batch.map((w) => w.input));
      if (!Array.isArray(outputs) || outputs.length !== batch.length) {
        throw new Error(`batch call returned ${Array.isArray(outputs) ? outputs.length : typeof outputs} results for ${batch.length} inputs`);
      }
      for (let i = 0; i < batch.length; i++) batch[i]!.resolve(outputs[i]!);
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      this.#inFlight--;
      this.#pump();
    }
  }
}
