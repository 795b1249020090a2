import cluster from 'node:cluster';
import {
  RateLimiterCluster,
  RateLimiterClusterMaster,
  RateLimiterMemory,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { Errors } from '@ens/core';
import { LeasedLimits, serveRequestLeases } from './leased-limits.ts';

type LimiterOptions = { points: number; duration: number; keyPrefix: string };

/**
 * A counter in this process's memory, or, in a process of an `ens serve` with ENS_PROCESSES > 1,
 * one kept by the supervising process (over IPC), so that the processes sharing the port enforce
 * one limit together instead of one each. Separate `ens serve`s (other machines) count apart. The
 * token endpoint's counters ask on every request (few requests, and failures must count exactly);
 * the per-client request limit, on every /v2/ request, spends leases instead (leased-limits.ts).
 */
function limiter(o: LimiterOptions): RateLimiterAbstract {
  return cluster.isWorker && process.connected
    ? new RateLimiterCluster({ ...o, timeoutMs: 2_000 })
    : new RateLimiterMemory(o);
}

/** In the supervising process of an `ens serve`: keeps the counters its processes share. */
export function serveClusterRateLimits(): void {
  new RateLimiterClusterMaster();
  serveRequestLeases();
}

/** The 429 of the per-client limit, however it was counted (leases or this process's memory). */
function overClientLimit(perSecond: number, waitMs: number): Error {
  return Errors.rateLimited(
    `Rate limit of ${perSecond} requests per second for this client exceeded.`,
    waitMs / 1000,
  );
}

/**
 * Request-rate limits per client: never more than the limit across the processes of one
 * `ens serve` (leases from the supervisor, see leased-limits.ts), counted in memory when alone.
 */
export class ClientRateLimits {
  readonly #byLimit = new Map<number, RateLimiterAbstract>();
  readonly #leases: LeasedLimits | null;

  constructor(processes = 1) {
    this.#leases =
      cluster.isWorker && process.connected && processes > 1 ? new LeasedLimits(processes) : null;
  }

  /**
   * Consumes one request of `clientId` against `perSecond`; throws ENS_ERR_RATE_LIMITED when over.
   */
  async consume(clientId: string, perSecond: number): Promise<void> {
    if (this.#leases) {
      const waitMs = await this.#leases.take(clientId, perSecond);
      if (waitMs !== null) throw overClientLimit(perSecond, waitMs);
      return;
    }
    let counter = this.#byLimit.get(perSecond);
    if (!counter) {
      counter = new RateLimiterMemory({
        points: perSecond,
        duration: 1,
        keyPrefix: `c${perSecond}`,
      });
      this.#byLimit.set(perSecond, counter);
    }
    try {
      await counter.consume(clientId);
    } catch (e) {
      if (e instanceof RateLimiterRes) {
        throw overClientLimit(perSecond, e.msBeforeNext);
      }
      throw e;
    }
  }
}

/**
 * A budget of requests per minute for each remote address, on a route anyone may call without
 * signing in (the one-click unsubscribe): it bounds the work one address can cause.
 */
export class AddressRateLimits {
  readonly #requests: RateLimiterAbstract;

  constructor(
    readonly perMinute: number,
    keyPrefix: string,
  ) {
    this.#requests = limiter({ points: perMinute, duration: 60, keyPrefix });
  }

  /** Counts a request from `address`; throws ENS_ERR_RATE_LIMITED when over. */
  async consume(address: string): Promise<void> {
    try {
      await this.#requests.consume(address);
    } catch (e) {
      if (e instanceof RateLimiterRes)
        throw Errors.rateLimited(
          `Too many requests from this address; at most ${this.perMinute} per minute.`,
          e.msBeforeNext / 1000,
        );
      throw e;
    }
  }
}

/**
 * Token endpoint limits. Client ids are not secret (a token's `sub` carries one), so a count per
 * client id would let anyone lock a client out by guessing its secret. Instead:
 * - every request counts against its address (`perMinute`), before the secret's hash is checked,
 *   which bounds the work one address can cause;
 * - failed attempts count against the pair (client id, address) and against the address, with
 *   smaller budgets; once either is spent that address gets 429, even with the right secret,
 *   until the minute has passed.
 * A correct secret from any other address is never refused for someone else's failures. Guessing
 * from many addresses is bounded by the secrets themselves: 32 random bytes.
 */
export class TokenRateLimits {
  readonly #requests: RateLimiterAbstract;
  readonly #pairFailures: RateLimiterAbstract;
  readonly #addressFailures: RateLimiterAbstract;
  readonly failuresPerPair: number;
  readonly failuresPerAddress: number;

  constructor(readonly perMinute: number) {
    this.failuresPerPair = Math.max(5, Math.floor(perMinute / 6));
    this.failuresPerAddress = Math.max(10, Math.floor(perMinute / 2));
    this.#requests = limiter({ points: perMinute, duration: 60, keyPrefix: 'token-req' });
    this.#pairFailures = limiter({
      points: this.failuresPerPair,
      duration: 60,
      keyPrefix: 'token-fail-pair',
    });
    this.#addressFailures = limiter({
      points: this.failuresPerAddress,
      duration: 60,
      keyPrefix: 'token-fail-addr',
    });
  }

  /**
   * Counts a request; throws ENS_ERR_RATE_LIMITED when the address is over a budget. Call before
   * checking the secret.
   */
  async admit(address: string, clientId: string | undefined): Promise<void> {
    try {
      await this.#requests.consume(address);
    } catch (e) {
      throw this.#limited(
        e,
        `Too many token requests from this address; at most ${this.perMinute} per minute.`,
      );
    }
    const spent = await Promise.all([
      clientId === undefined ? null : this.#pairFailures.get(`${clientId} ${address}`),
      this.#addressFailures.get(address),
    ]);
    const blocked = spent.find((r) => r !== null && r.remainingPoints <= 0);
    if (blocked) {
      throw Errors.rateLimited(
        'Too many failed token requests from this address; wait before trying again.',
        blocked.msBeforeNext / 1000,
      );
    }
  }

  /**
   * Counts a failed attempt (wrong or unknown client, wrong secret) against the pair and the
   * address.
   */
  async failed(address: string, clientId: string | undefined): Promise<void> {
    await Promise.all([
      clientId === undefined ? null : this.#pairFailures.penalty(`${clientId} ${address}`, 1),
      this.#addressFailures.penalty(address, 1),
    ]);
  }

  #limited(e: unknown, detail: string): unknown {
    return e instanceof RateLimiterRes ? Errors.rateLimited(detail, e.msBeforeNext / 1000) : e;
  }
}
