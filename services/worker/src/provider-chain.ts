import CircuitBreaker from 'opossum';
import {
  classifyError,
  EnsError,
  permanentError,
  type OutboundMessage,
  type SendResult,
} from '@ens/plugin-sdk';
import type { Channel, Runtime } from '@ens/core';
import { providerUp } from '@ens/core/internal';
import type { LoadedProvider } from './provider-loader.ts';

/** A send that failed, with the provider that was asked (recorded as the attempt's provider). */
/**
 * A send through the chain failed; `provider` is the one that answered, `causeValue` what it threw.
 */
export class ChainSendError extends EnsError {
  static override readonly code: string = 'ENS_ERR_PROVIDER_CHAIN';
  constructor(
    readonly provider: string,
    readonly causeValue: unknown,
  ) {
    super(classifyError(causeValue).message);
  }
}

export interface ChainOptions {
  /** Sends in the breaker's window before it may open, and the failure count that opens it. */
  threshold: number;
  cooldownMs: number;
  /** Per send; a provider that has not answered by then has failed transiently. */
  sendTimeoutMs: number;
  logger: Runtime['logger'];
}

/** The window in which transient failures are counted. */
const WINDOW_MS = 10_000;

function withTimeout<T>(p: Promise<T>, ms: number, who: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, rej) => {
      t = setTimeout(() => rej(new Error(`${who}: provider did not answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

interface Member {
  loaded: LoadedProvider;
  /** Absent when the chain has one provider: there is nothing to fail over to. */
  breaker?: CircuitBreaker<[OutboundMessage], SendResult>;
}

/**
 * A channel's providers in order of preference. Each send goes to the first provider that is up
 * (and, for push, reaches the device's platform). A provider whose sends fail transiently — at
 * least `threshold` sends in the last 10 s and more than half of them transient failures — is taken
 * out for `cooldownMs`; then one trial send decides whether it is back. Permanent and rate-limited
 * answers mean the provider is up and count as successes.
 *
 * When every provider is out, the first one is asked anyway: a delivery never fails, or burns an
 * attempt, without a provider having been tried.
 */
export class ProviderChain {
  readonly #members: Member[];

  constructor(
    readonly channel: Channel,
    providers: readonly LoadedProvider[],
    private readonly opts: ChainOptions,
  ) {
    const failover = providers.length > 1;
    this.#members = providers.map((loaded) => {
      const send = (m: OutboundMessage) =>
        withTimeout(loaded.provider.send(m), opts.sendTimeoutMs, loaded.name);
      providerUp.set({ channel, provider: loaded.name }, 1);
      if (!failover) return { loaded };
      const breaker = new CircuitBreaker(send, {
        timeout: false,
        resetTimeout: opts.cooldownMs,
        rollingCountTimeout: WINDOW_MS,
        rollingCountBuckets: 10,
        volumeThreshold: opts.threshold,
        errorThresholdPercentage: 50,
        errorFilter: (err: unknown) => classifyError(err).kind !== 'transient',
      });
      breaker.on('open', () => {
        providerUp.set({ channel, provider: loaded.name }, 0);
        opts.logger.warn(
          { channel, provider: loaded.name, cooldownMs: opts.cooldownMs },
          'provider is failing; sends go to the next provider of the channel',
        );
      });
      breaker.on('halfOpen', () =>
        opts.logger.info(
          { channel, provider: loaded.name },
          'provider cool-down over; the next send is a trial',
        ),
      );
      breaker.on('close', () => {
        providerUp.set({ channel, provider: loaded.name }, 1);
        opts.logger.info({ channel, provider: loaded.name }, 'provider is back');
      });
      return { loaded, breaker };
    });
  }

  /** The provider a delivery is claimed for; the one that answers is recorded at the finish. */
  get primary(): string {
    return this.#members[0]!.loaded.name;
  }

  /** True when at least one provider sends to registry devices (push fan-out). */
  get sendsToDevices(): boolean {
    return this.#members.some((m) => m.loaded.pushPlatforms !== null);
  }

  /** Names of the providers that are currently taken out. */
  down(): string[] {
    return this.#members.filter((m) => m.breaker?.opened).map((m) => m.loaded.name);
  }

  /**
   * Sends through the first provider that is up; throws ChainSendError naming the provider asked.
   */
  async send(m: OutboundMessage): Promise<{ provider: string; result: SendResult }> {
    const platform = m.device?.platform;
    const able = this.#members.filter(
      (x) =>
        platform === undefined ||
        x.loaded.pushPlatforms === null ||
        x.loaded.pushPlatforms.includes(platform),
    );
    if (able.length === 0) {
      throw new ChainSendError(
        this.primary,
        permanentError(
          `push: no provider for ${platform} devices is configured (ENS_PROVIDERS push=…)`,
        ),
      );
    }
    for (const x of able) {
      if (!x.breaker) return this.#direct(x, m);
      try {
        return { provider: x.loaded.name, result: await x.breaker.fire(m) };
      } catch (err) {
        // Out (or its one trial send is already under way): the next provider takes this send.
        if ((err as { code?: string }).code === 'EOPENBREAKER') continue;
        throw new ChainSendError(x.loaded.name, err);
      }
    }
    return this.#direct(able[0]!, m);
  }

  async #direct(x: Member, m: OutboundMessage): Promise<{ provider: string; result: SendResult }> {
    try {
      return {
        provider: x.loaded.name,
        result: await withTimeout(
          x.loaded.provider.send(m),
          this.opts.sendTimeoutMs,
          x.loaded.name,
        ),
      };
    } catch (err) {
      throw new ChainSendError(x.loaded.name, err);
    }
  }

  close(): void {
    for (const x of this.#members) x.breaker?.shutdown();
  }
}
