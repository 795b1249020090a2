import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { Errors } from '@ens/core';

/**
 * Request-rate limits, counted in this process's memory: with several API processes, each
 * enforces the limit on its own share of traffic (documented in the README).
 */
export class ClientRateLimits {
  readonly #byLimit = new Map<number, RateLimiterMemory>();

  /** Consumes one request of `clientId` against `perSecond`; throws ENS_ERR_RATE_LIMITED when over. */
  async consume(clientId: string, perSecond: number): Promise<void> {
    let limiter = this.#byLimit.get(perSecond);
    if (!limiter) {
      limiter = new RateLimiterMemory({ points: perSecond, duration: 1, keyPrefix: `c${perSecond}` });
      this.#byLimit.set(perSecond, limiter);
    }
    try {
      await limiter.consume(clientId);
    } catch (e) {
      if (e instanceof RateLimiterRes) {
        throw Errors.rateLimited(`Rate limit of ${perSecond} requests per second for this client exceeded.`, e.msBeforeNext / 1000);
      }
      throw e;
    }
  }
}

/** Token endpoint limits: per client id and per remote address, per minute. */
export class TokenRateLimits {
  readonly #limiter: RateLimiterMemory;

  constructor(readonly perMinute: number) {
    this.#limiter = new RateLimiterMemory({ points: perMinute, duration: 60, keyPrefix: 'token' });
  }

  async consume(address: string, clientId: string | undefined): Promise<void> {
    const keys = [`ip:${address}`, ...(clientId ? [`client:${clientId}`] : [])];
    for (const key of keys) {
      try {
        await this.#limiter.consume(key);
      } catch (e) {
        if (e instanceof RateLimiterRes) {
          throw Errors.rateLimited(`Too many token requests; at most ${this.perMinute} per minute per client and per address.`, e.msBeforeNext / 1000);
        }
        throw e;
      }
    }
  }
}
