import { EnsError } from '@ens/core';
import { FairQueue, type Flow } from '@ens/core/internal';

/*
 * The callbacks role's post slots, shared among clients. A post holds its slot until the receiver
 * answers or ENS_CALLBACK_TIMEOUT passes, so a receiver that hangs holds slots for the whole
 * timeout. With one line in arrival order, a client whose receiver hung took every slot and every
 * other client's callbacks waited behind its timeouts (16 s for one callback behind 300 in
 * test/callbacks/slow-receiver.test.ts, minutes behind a larger backlog). So:
 *
 * - one client's posts hold at most `perClient` of the `size` slots at once; the rest wait in that
 *   client's own line (parked);
 * - the waiting posts of clients below their share take free slots in turn, by client (the same
 *   deficit round robin as the worker's sends, see FairQueue);
 * - when a client's posts are slow, a post that would wait more than `maxWaitMs` behind them is
 *   handed back, for about its wait, to be read again then (`deferral` on arrival, `deferParked`
 *   for those already parked): one client's backlog then does not fill the wake-ups the role holds
 *   and keep other clients' wake-ups from being read at all. A handed-back post counts as ahead of
 *   the client's later ones until its time comes, so a large backlog comes back spread over the time
 *   the client's share needs for it, not all at once. Only slow posts count: a client whose
 *   receiver answers quickly frees its slots soon, however long its backlog.
 */

/**
 * Thrown by PostSlots.run once the slots are closed (the role is stopping), instead of running the
 * post.
 */
export class SlotsClosedError extends EnsError {
  static override readonly code: string = 'ENS_ERR_SLOTS_CLOSED';
  constructor() {
    super('slots are closed');
  }
}

/** Thrown to a parked post's caller when it is handed back: put the wake-up back for `delayMs`. */
export class PostDeferred extends EnsError {
  static override readonly code: string = 'ENS_ERR_POST_DEFERRED';
  constructor(readonly delayMs: number) {
    super(
      `post deferred for ${delayMs} ms: its client's earlier posts hold its share of the slots`,
    );
  }
}

export interface PostSlotsOptions {
  /** Posts in flight at once. */
  size: number;
  /** Posts of one client in flight at once. */
  perClient: number;
  /** A post that takes at least this long is slow. */
  slowPostMs: number;
  /** A post that would wait longer than this behind its client's slow posts is handed back... */
  maxWaitMs: number;
  /**
   * ...for its expected wait, but at most this long, so that a receiver that recovers is soon used
   * again.
   */
  maxDeferMs: number;
}

/** Marks where a post starts to depend on its receiver (see PostSlots.run). */
export interface ReceiverTimer {
  begin(): void;
}

interface Waiter {
  client: string;
  resolve: () => void;
  reject: (err: Error) => void;
}

interface ClientState {
  /** Posts of this client holding a slot or in the fair queue for one: at most perClient. */
  admitted: number;
  /** Posts waiting behind the client's own share, in arrival order. */
  parked: Waiter[];
  /** When each running post started (performance.now()). */
  started: Set<{ t0: number }>;
  /** Moving average of this client's post durations, ms; undefined before its first post ends. */
  postMs: number | undefined;
  /**
   * When each handed-back post is due back (performance.now()), from `handedBackHead` on. Pruned
   * from the front only, so the count is approximate when dues are not in order (a capped delay).
   */
  handedBack: number[];
  handedBackHead: number;
}

/** Weight of the latest post in the moving average of post durations. */
const EWMA_NEW = 0.2;
const NO_TENANT = '';

export class PostSlots {
  #free: number;
  #closed = false;
  readonly #o: PostSlotsOptions;
  readonly #clients = new Map<string, ClientState>();
  readonly #fair = new FairQueue<Waiter>();

  constructor(o: PostSlotsOptions) {
    if (!Number.isInteger(o.size) || o.size < 1)
      throw new RangeError('size must be a positive integer');
    if (!Number.isInteger(o.perClient) || o.perClient < 1 || o.perClient > o.size)
      throw new RangeError('perClient must be an integer from 1 to size');
    for (const k of ['slowPostMs', 'maxWaitMs', 'maxDeferMs'] as const)
      if (!(o[k] >= 0)) throw new RangeError(`${k} must not be negative`);
    this.#free = o.size;
    this.#o = { ...o };
  }

  /**
   * Runs fn in a slot once the client's turn comes, and frees the slot when fn settles. Rejects,
   * without running fn, with SlotsClosedError when the slots close first, or with PostDeferred
   * when `deferParked` hands the waiting post back.
   *
   * fn calls `receiver.begin()` when it starts the part that depends on the receiver (the HTTP
   * request); from then until fn settles is the post's duration. What comes before (the claim in
   * PostgreSQL) is not the receiver's: a slow database must not make every receiver look slow.
   */
  async run<T>(client: string, fn: (receiver: ReceiverTimer) => Promise<T>): Promise<T> {
    await this.#acquire(client);
    const st = this.#state(client);
    // An object per post: two posts may start at the same performance.now().
    let post: { t0: number } | undefined;
    const receiver: ReceiverTimer = {
      begin() {
        if (post) return;
        post = { t0: performance.now() };
        st.started.add(post);
      },
    };
    try {
      return await fn(receiver);
    } finally {
      if (post) {
        const ms = performance.now() - post.t0;
        st.started.delete(post);
        st.postMs = st.postMs === undefined ? ms : st.postMs + EWMA_NEW * (ms - st.postMs);
      }
      this.#release(st);
    }
  }

  /**
   * For a post of this client arriving now: 0 to run it, or how long to hand it back for, when it
   * would wait more than maxWaitMs behind the client's own slow posts (it then counts as ahead of
   * the client's later posts until that time).
   */
  deferral(client: string): number {
    const st = this.#clients.get(client);
    if (!st || st.admitted < this.#o.perClient) return 0;
    const now = performance.now();
    const wait = this.#waitAt(this.#perPost(st, now), this.#ahead(st, now));
    return wait > this.#o.maxWaitMs ? this.#handBack(st, wait, now) : 0;
  }

  /**
   * Whether a post of this client arriving now would start within maxWaitMs, by the client's post
   * durations, however fast (deferral lets a fast receiver's backlog wait as long as it takes).
   * Unlike deferral it hands nothing back. For a callback whose lease already runs (claimed at its
   * insert), which must not wait long for its slot.
   */
  startsSoon(client: string): boolean {
    if (this.#closed) return false;
    const st = this.#clients.get(client);
    if (!st || st.admitted < this.#o.perClient) return true;
    const now = performance.now();
    return this.#turnsWait(this.#perPost(st, now), this.#ahead(st, now)) <= this.#o.maxWaitMs;
  }

  /**
   * Hands back every parked post that would wait longer than maxWaitMs (its caller gets
   * PostDeferred with the time to hand its wake-up back for), keeping the ones nearer their turn.
   * Returns how many.
   */
  deferParked(): number {
    const now = performance.now();
    let n = 0;
    for (const st of this.#clients.values()) {
      if (st.parked.length === 0) continue;
      const perPost = this.#perPost(st, now);
      // The parked within maxWaitMs are the first whole rounds of the client's share that fit in
      // it.
      if (perPost === 0 || perPost < this.#o.slowPostMs) continue;
      const keep = Math.floor(this.#o.maxWaitMs / perPost) * this.#o.perClient;
      if (keep >= st.parked.length) continue;
      const ahead = keep + this.#handedBackCount(st, now);
      const back = st.parked.splice(keep);
      for (const [i, w] of back.entries())
        w.reject(new PostDeferred(this.#handBack(st, this.#waitAt(perPost, ahead + i), now)));
      n += back.length;
    }
    return n;
  }

  /** Posts waiting for a slot, parked or in turn (not those handed back). */
  get waiting(): number {
    let n = this.#fair.size;
    for (const st of this.#clients.values()) n += st.parked.length;
    return n;
  }

  /** For shutdown: posts under way finish, waiting and later ones get SlotsClosedError. */
  close(): void {
    this.#closed = true;
    const err = new SlotsClosedError();
    for (let w = this.#fair.shift(); w !== undefined; w = this.#fair.shift()) w.reject(err);
    for (const st of this.#clients.values()) for (const w of st.parked.splice(0)) w.reject(err);
  }

  /**
   * How long the client's posts take: the moving average, or the age of its oldest running post if
   * that is longer (a receiver that has just started to hang has no slow post finished yet).
   */
  #perPost(st: ClientState, now: number): number {
    let oldest = now;
    for (const p of st.started) oldest = Math.min(oldest, p.t0);
    return Math.max(st.postMs ?? 0, now - oldest);
  }

  /**
   * The wait of a post with `ahead` posts of its client before it in line: the rounds of the
   * client's share ahead of it times its posts' duration. 0 when its posts are not slow.
   */
  #waitAt(perPost: number, ahead: number): number {
    return perPost < this.#o.slowPostMs ? 0 : this.#turnsWait(perPost, ahead);
  }

  /** The rounds of the client's share ahead of a post times its posts' duration, slow or not. */
  #turnsWait(perPost: number, ahead: number): number {
    return Math.ceil((ahead + 1) / this.#o.perClient) * perPost;
  }

  /** The client's posts in line before one arriving now: parked, and handed back until later. */
  #ahead(st: ClientState, now: number): number {
    return st.parked.length + this.#handedBackCount(st, now);
  }

  /** Records a post handed back for `waitMs` (at most maxDeferMs); returns the time, whole ms. */
  #handBack(st: ClientState, waitMs: number, now: number): number {
    const ms = Math.ceil(Math.min(waitMs, this.#o.maxDeferMs));
    st.handedBack.push(now + ms);
    return ms;
  }

  #handedBackCount(st: ClientState, now: number): number {
    while (st.handedBackHead < st.handedBack.length && st.handedBack[st.handedBackHead]! <= now)
      st.handedBackHead++;
    if (st.handedBackHead === st.handedBack.length) {
      st.handedBack.length = 0;
      st.handedBackHead = 0;
    } else if (st.handedBackHead > 1024 && st.handedBackHead * 2 > st.handedBack.length) {
      st.handedBack.splice(0, st.handedBackHead);
      st.handedBackHead = 0;
    }
    return st.handedBack.length - st.handedBackHead;
  }

  // Clients are the operator's (a handful to thousands), so their small state is kept, and with it
  // how slow their receivers were the last time.
  #state(client: string): ClientState {
    let st = this.#clients.get(client);
    if (!st) {
      st = {
        admitted: 0,
        parked: [],
        started: new Set(),
        postMs: undefined,
        handedBack: [],
        handedBackHead: 0,
      };
      this.#clients.set(client, st);
    }
    return st;
  }

  #acquire(client: string): Promise<void> {
    if (this.#closed) return Promise.reject(new SlotsClosedError());
    const st = this.#state(client);
    if (st.admitted < this.#o.perClient && this.#free > 0) {
      st.admitted++;
      this.#free--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = { client, resolve, reject };
      if (st.admitted < this.#o.perClient) this.#admit(st, w);
      else st.parked.push(w);
    });
  }

  /** Puts a waiter of a client below its share in the fair queue. */
  #admit(st: ClientState, w: Waiter): void {
    st.admitted++;
    const flow: Flow = { client: w.client, tenant: NO_TENANT, priority: false };
    this.#fair.push(flow, w);
  }

  #release(st: ClientState): void {
    st.admitted--;
    const next = st.parked.shift();
    if (next) this.#admit(st, next);
    const w = this.#closed ? undefined : this.#fair.shift();
    if (!w) {
      this.#free++;
      return;
    }
    w.resolve();
  }
}
