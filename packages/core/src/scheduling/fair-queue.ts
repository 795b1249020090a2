/*
 * Deficit round robin over two levels, clients and then tenants within a client, with a priority
 * lane inside each client. Every item costs one send, so a flow's quantum is its weight: on its
 * turn a client gets `weight` items, then the next client with work has its turn; within the
 * client's items the same happens across its tenants. A flow that becomes active joins at the end
 * of the round, so a client with one message waits for at most one turn of each other client with
 * work, however large their backlogs. The client's priority lane (event types the operator named)
 * is taken before its tenants' ordinary items, inside the client's own share: one client's urgent
 * messages go ahead of its newsletters, never ahead of another client's turn.
 *
 * Within a flow, items leave in arrival order, except that `urgent` pushes (retries) go to the
 * front of their own flow: a retry waits for no first attempt of its own flow and for exactly one
 * turn of every other flow, so it neither jumps other flows nor starves behind its own backlog.
 */

/** Where an item belongs. */
export interface Flow {
  client: string;
  tenant: string;
  /** The client's priority lane. */
  priority: boolean;
}

/**
 * Weights the operator set; 1 when unset. Read whenever a flow starts a turn, so a change applies
 * at the next turn.
 */
export interface FlowWeights {
  client(client: string): number;
  tenant(client: string, tenant: string): number;
}

const EVEN: FlowWeights = { client: () => 1, tenant: () => 1 };

/** A FIFO that can also take items at its front, with O(1) operations at both ends. */
class Deque<T> {
  #items: (T | undefined)[] = new Array(16);
  #head = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(item: T): void {
    if (this.#size === this.#items.length) this.#grow();
    this.#items[(this.#head + this.#size) % this.#items.length] = item;
    this.#size++;
  }

  unshift(item: T): void {
    if (this.#size === this.#items.length) this.#grow();
    this.#head = (this.#head - 1 + this.#items.length) % this.#items.length;
    this.#items[this.#head] = item;
    this.#size++;
  }

  peek(): T | undefined {
    return this.#size === 0 ? undefined : this.#items[this.#head];
  }

  shift(): T | undefined {
    if (this.#size === 0) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) % this.#items.length;
    this.#size--;
    return item;
  }

  /** Visits every item, front to back. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.#size; i++) yield this.#items[(this.#head + i) % this.#items.length]!;
  }

  #grow(): void {
    const next: (T | undefined)[] = new Array(this.#items.length * 2);
    for (let i = 0; i < this.#size; i++)
      next[i] = this.#items[(this.#head + i) % this.#items.length];
    this.#items = next;
    this.#head = 0;
  }
}

/** One turn-taker of a round: holds what is left of its quantum. */
interface Member {
  credit: number;
  readonly size: number;
}

/** The active members of one level, in turn order. */
class Round<M extends Member> {
  readonly #active = new Deque<M>();

  get empty(): boolean {
    return this.#active.size === 0;
  }

  /** A member that just got work joins at the end of the round. */
  join(member: M): void {
    member.credit = 0;
    this.#active.push(member);
  }

  /** The member whose turn it is; its quantum is granted when its turn starts. */
  current(quantum: (m: M) => number): M | undefined {
    const m = this.#active.peek();
    if (m && m.credit <= 0) m.credit = Math.max(1, Math.floor(quantum(m)));
    return m;
  }

  /**
   * Charges one item to the current member and ends its turn when its quantum or its work is spent.
   */
  charge(m: M): void {
    m.credit--;
    if (m.size === 0) {
      this.#active.shift();
      m.credit = 0;
    } else if (m.credit <= 0) {
      this.#active.push(this.#active.shift()!);
    }
  }
}

class TenantQueue<T> implements Member {
  credit = 0;
  readonly items = new Deque<T>();
  constructor(readonly name: string) {}
  get size(): number {
    return this.items.size;
  }
}

class ClientQueue<T> implements Member {
  credit = 0;
  size = 0;
  readonly priority = new Deque<T>();
  readonly tenants = new Map<string, TenantQueue<T>>();
  readonly round = new Round<TenantQueue<T>>();
  constructor(readonly name: string) {}
}

export class FairQueue<T> {
  readonly #clients = new Map<string, ClientQueue<T>>();
  readonly #round = new Round<ClientQueue<T>>();
  #size = 0;

  constructor(private readonly weights: FlowWeights = EVEN) {}

  get size(): number {
    return this.#size;
  }

  /** Adds an item at the end of its flow, or at its front when `urgent` (a retry). */
  push(flow: Flow, item: T, urgent = false): void {
    let c = this.#clients.get(flow.client);
    if (!c) {
      c = new ClientQueue<T>(flow.client);
      this.#clients.set(flow.client, c);
    }
    if (c.size === 0) this.#round.join(c);
    if (flow.priority) {
      if (urgent) c.priority.unshift(item);
      else c.priority.push(item);
    } else {
      let tq = c.tenants.get(flow.tenant);
      if (!tq) {
        tq = new TenantQueue<T>(flow.tenant);
        c.tenants.set(flow.tenant, tq);
      }
      if (tq.size === 0) c.round.join(tq);
      if (urgent) tq.items.unshift(item);
      else tq.items.push(item);
    }
    c.size++;
    this.#size++;
  }

  /** The next item in fair order, or undefined when empty. */
  shift(): T | undefined {
    const c = this.#round.current((m) => this.weights.client(m.name));
    if (!c) return undefined;
    let item: T;
    if (c.priority.size > 0) {
      item = c.priority.shift()!;
    } else {
      const tq = c.round.current((m) => this.weights.tenant(c.name, m.name))!;
      item = tq.items.shift()!;
      c.round.charge(tq);
      if (tq.size === 0) c.tenants.delete(tq.name);
    }
    c.size--;
    this.#size--;
    this.#round.charge(c);
    if (c.size === 0) this.#clients.delete(c.name);
    return item;
  }

  /** Every item waiting, in no particular order. */
  *items(): IterableIterator<T> {
    for (const c of this.#clients.values()) {
      yield* c.priority;
      for (const tq of c.tenants.values()) yield* tq.items;
    }
  }

  /** Items waiting per client and tenant (the priority lane counts as tenant `*priority`). */
  backlog(): { client: string; tenant: string; waiting: number }[] {
    const out: { client: string; tenant: string; waiting: number }[] = [];
    for (const c of this.#clients.values()) {
      if (c.priority.size > 0)
        out.push({ client: c.name, tenant: '*priority', waiting: c.priority.size });
      for (const tq of c.tenants.values())
        out.push({ client: c.name, tenant: tq.name, waiting: tq.size });
    }
    return out;
  }
}
