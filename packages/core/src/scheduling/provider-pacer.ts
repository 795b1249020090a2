import type { Db } from '../db/pool.ts';
import { providerPace, providerPaceWaiting } from '../metrics.ts';

/** A provider's pace: sends per second across every worker process. */
export interface Pace {
  perSecond: number;
}

/*
 * Providers count "N per second" over any one-second window. Sends are therefore spaced evenly,
 * one every 1/N s, never in bursts, and at 97 % of N: a one-second window then holds 3 % fewer
 * sends than allowed, which is 30 ms worth of sends at any N, the room for jitter between a send's
 * time and its request reaching the provider (event loops on both sides, the network). A send
 * more than LATE_MS behind its time takes a new one (see sendAt), so lateness never uses more than
 * a third of that room. (At 98 %, one run in a few of the bench saw a send refused.)
 */
const HEADROOM = 0.97;
const LATE_MS = 10;
/** How far ahead one process reserves send times: enough to cover a reservation's round trip. */
const HORIZON_MS = 500;
/**
 * A waiter is released this long before its send time, to claim its delivery meanwhile, and then
 * waits out the rest (`sendAt`): the claim's latency, which varies, does not move the send.
 */
const LEAD_MS = 200;

interface Provider {
  readonly name: string;
  readonly perSecond: number;
  readonly intervalMs: number;
  readonly waiters: ((sendAt: number) => void)[];
  /** A reservation (or the wait for the next one) is under way. */
  busy: boolean;
  pauseMs: number;
}

/**
 * Paces sends to providers that have a rate (the plugin's own, or the operator's ENS_PROVIDER_PACE)
 * across all worker processes. Send times are reserved from one row per provider in PostgreSQL
 * (ens_reserve_sends), for every waiting send of this process at once, up to a quarter of a second
 * ahead; each waiter is released at its time. A provider's 429 with Retry-After moves its next free
 * time (`slowDown`), which holds every process, not only the one that was told.
 */
export class ProviderPacer {
  readonly #providers = new Map<string, Provider>();
  #closed = false;

  constructor(
    private readonly db: Db,
    paces: ReadonlyMap<string, Pace>,
  ) {
    for (const [name, pace] of paces) {
      this.#providers.set(name, {
        name,
        perSecond: pace.perSecond,
        intervalMs: 1000 / (pace.perSecond * HEADROOM),
        waiters: [],
        busy: false,
        pauseMs: 0,
      });
      providerPace.set({ provider: name }, pace.perSecond);
    }
  }

  /**
   * Reserves a send time for one message to `provider` and resolves shortly before it with that
   * time (Date.now() scale); pass it to `sendAt` right before sending. An unpaced provider
   * resolves at once with 0.
   */
  take(provider: string): Promise<number> {
    const p = this.#providers.get(provider);
    if (!p || this.#closed) return Promise.resolve(0);
    return new Promise<number>((resolve) => {
      p.waiters.push(resolve);
      providerPaceWaiting.inc({ provider });
      this.#pump(p);
    });
  }

  /**
   * Resolves at the send time `take` gave, with the time it resolved for. A send that missed its
   * time by more than LATE_MS takes a new time instead: sent late, it would crowd the sends of the
   * times after it into one second. That is checked before the wait (the claim was slow) and after
   * it: a timer fires late when this process stalled meanwhile (a collection, a busy event loop),
   * and such a send once went 55 ms late, between two on time from another process, and was
   * refused. Until close(), it never resolves before `at` by Date.now().
   */
  async sendAt(provider: string, at: number): Promise<number> {
    if (!this.#providers.has(provider) || at === 0) return at;
    for (;;) {
      while (!this.#closed && Date.now() > at + LATE_MS) at = await this.take(provider);
      const ms = at - Date.now();
      if (ms <= 0 || this.#closed) return at;
      // Round again after the wait: it may have ended late (a stall), or up to 2 ms early by
      // Date.now(), since timers count whole milliseconds of another clock and `at` is fractional.
      await new Promise((r) => setTimeout(r, ms));
    }
  }

  /** The provider asked for a pause (a 429 with Retry-After): nobody sends to it for `ms`. */
  slowDown(provider: string, ms: number): void {
    const p = this.#providers.get(provider);
    if (!p || ms <= 0) return;
    p.pauseMs = Math.max(p.pauseMs, ms);
    this.#pump(p, true);
  }

  /** Lets every waiter go (shutdown: their sends are given back to the queue by the caller). */
  close(): void {
    this.#closed = true;
    for (const p of this.#providers.values()) for (const w of p.waiters.splice(0)) w(0);
  }

  #pump(p: Provider, force = false): void {
    if (p.busy || this.#closed || (p.waiters.length === 0 && !force)) return;
    p.busy = true;
    void this.#reserve(p);
  }

  async #reserve(p: Provider): Promise<void> {
    let nextInMs = 0;
    try {
      const pauseMs = p.pauseMs;
      p.pauseMs = 0;
      const { rows } = await this.db.query<{
        granted: number;
        first_in_ms: number;
        first_at_ms: number;
      }>({
        name: 'ens-reserve-sends',
        text:
          'SELECT granted, first_in_ms, first_at_ms FROM ens_reserve_sends($1, $2, $3, $4, $5, ' +
          '$6)',
        values: [p.name, p.perSecond, p.intervalMs, p.waiters.length, HORIZON_MS, pauseMs],
      });
      const { granted, first_in_ms, first_at_ms } = rows[0]!;
      // The database's clock, not "now + first_in_ms": the answer's latency differs between
      // processes, and would move their send times closer together than the interval.
      const base = first_at_ms;
      p.waiters.splice(0, granted).forEach((w, i) => {
        const at = base + i * p.intervalMs;
        setTimeout(() => w(at), Math.max(0, at - LEAD_MS - Date.now()));
      });
      providerPaceWaiting.dec({ provider: p.name }, granted);
      // Ask again once the last reserved time is near, or when the horizon was full.
      nextInMs = Math.max(1, first_in_ms + granted * p.intervalMs - HORIZON_MS / 2);
    } catch {
      // PostgreSQL away: sends wait, as they would for their claim; try again shortly.
      nextInMs = 1000;
    }
    if (p.waiters.length > 0) await new Promise((r) => setTimeout(r, nextInMs));
    p.busy = false;
    this.#pump(p);
  }
}
