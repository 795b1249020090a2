import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { answerChildren, askSupervisor } from '@ens/core/internal';

/*
 * The per-client request limit across the processes of one `ens serve` (ENS_PROCESSES > 1).
 * Asking the supervisor on every request (rate-limiter-flexible's cluster limiter) kept the count
 * exact but cost an IPC round trip per request, and with N processes the supervisor's one thread
 * would answer every request of all of them (one bench run: two processes accepted 0.62× what one
 * did, 0.97× with the count kept locally; two-process runs here spread from 0.62 to 0.98, so that
 * pair alone proves little). Instead the supervisor holds the one count and hands a process a
 * lease of several requests of a client's current second at once; the process spends it locally
 * and asks again when it is used up. The count is never exceeded (every request spent was granted
 * by the supervisor); what a process leased and did not spend by the end of the second is lost, so
 * a client whose requests are spread over N processes may get up to N × lease − N fewer than its
 * limit in a second. A lease is an eighth of the limit divided by the processes, so that loss stays
 * small and IPC happens a few times a second per client, not per request.
 */

const CHANNEL = 'ens:lease';
const TIMEOUT_MS = 2_000;

interface LeaseAsk {
  perSecond: number;
  key: string;
  want: number;
}
interface Lease {
  granted: number;
  msBeforeNext: number;
}

/** In the supervising process: keeps each limit's one count and grants leases from it. */
export function serveRequestLeases(): void {
  const counts = new Map<number, RateLimiterMemory>();
  answerChildren<LeaseAsk, Lease>(CHANNEL, async (q) => {
    let count = counts.get(q.perSecond);
    if (!count) {
      count = new RateLimiterMemory({ points: q.perSecond, duration: 1 });
      counts.set(q.perSecond, count);
    }
    // One consume of `want` points is one step on the count (no await between reading and
    // writing it), so concurrent asks can never be granted more than the limit together.
    const r = await count.consume(q.key, q.want).catch((e: unknown) => {
      if (e instanceof RateLimiterRes) return e;
      throw e;
    });
    const before = r.consumedPoints - q.want;
    return {
      granted: Math.max(0, Math.min(q.want, q.perSecond - before)),
      msBeforeNext: r.msBeforeNext,
    };
  });
}

/** A process's leases: requests of a client's current second it may admit without asking. */
export class LeasedLimits {
  readonly #leases = new Map<string, { left: number; until: number }>();
  /**
   * The ask under way for each limit and client. Requests that find no lease while one is being
   * asked for wait for it and share it: each asking for a lease of its own would take the second's
   * whole count in a few asks, and refuse the rest while most of it sat unspent in their leases.
   */
  readonly #asking = new Map<string, Promise<Lease>>();

  constructor(readonly processes: number) {}

  /**
   * Admits one request of `key` under `perSecond`; resolves how long to wait when refused, or null.
   */
  async take(key: string, perSecond: number): Promise<number | null> {
    const lk = `${perSecond} ${key}`;
    for (;;) {
      const lease = this.#leases.get(lk);
      if (lease && lease.until > Date.now() && lease.left > 0) {
        lease.left--;
        return null;
      }
      let ask = this.#asking.get(lk);
      if (!ask) {
        ask = this.#ask(lk, key, perSecond).finally(() => this.#asking.delete(lk));
        this.#asking.set(lk, ask);
      }
      const a = await ask;
      // Refused for the rest of the second: so is every request that waited for this ask. Granted:
      // take from the lease, or ask again if the requests before this one have spent it.
      if (a.granted === 0) return a.msBeforeNext;
    }
  }

  async #ask(lk: string, key: string, perSecond: number): Promise<Lease> {
    const want = Math.max(1, Math.floor(perSecond / (8 * this.processes)));
    const a = await askSupervisor<Lease>(
      CHANNEL,
      { perSecond, key, want } satisfies LeaseAsk,
      TIMEOUT_MS,
    );
    if (a.granted > 0) {
      this.#leases.set(lk, { left: a.granted, until: Date.now() + a.msBeforeNext });
      if (this.#leases.size > 10_000) this.#forgetSpent();
    }
    return a;
  }

  #forgetSpent(): void {
    const now = Date.now();
    for (const [k, l] of this.#leases) if (l.until <= now || l.left <= 0) this.#leases.delete(k);
  }
}
