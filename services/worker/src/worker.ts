import { CHANNELS, checkOutboundUrl, guardedFetch, type Channel, type Runtime } from '@ens/core';
import {
  collectUnusedMedia, consumeWorkQueue, purgeExpiredIdempotencyKeys, requeueOverdueDeliveries, SEND_STREAM, sendConsumer, Slots, startSweeper, wakeCallbacks, wakeFeed,
} from '@ens/core/internal';
import type { PluginContext } from '@ens/plugin-sdk';
import { ProviderChain } from './provider-chain.ts';
import { checkProviderConfig, closeProviders, loadProviders, type LoadedProviders } from './provider-loader.ts';
import { sendHandler, sendTimeoutMs } from './send-loop.ts';

/**
 * Wake-ups a channel's loop holds per send slot (ENS_WORKER_CONCURRENCY). Claims and outcome
 * records are batched across the handlers waiting for them, so holding more messages than there
 * are sends in flight makes the batches larger without sending more at once.
 */
const MESSAGES_PER_SEND_SLOT = 4;

export interface WorkerRole {
  providers: LoadedProviders;
  chains: Map<Channel, ProviderChain>;
  stop(): Promise<void>;
}

/**
 * A status report can overtake the send that produced its message id: the provider may report
 * (or the sandbox handset answer) before the worker has recorded provider_message_id. An unknown
 * id is therefore looked up again for a few seconds before the report is given up as unknown.
 */
const UNKNOWN_REPORT_RETRY_MS = [20, 50, 100, 200, 400, 800, 1600];

/** The context a plugin gets: status reports go through the same store call as every webhook. */
export function pluginContext(rt: Runtime, pluginName: string): PluginContext {
  const logger = rt.logger.child({ plugin: pluginName });
  const guard = { allowPrivate: rt.config.allowPrivateCallbacks };
  return {
    logger,
    media: rt.media,
    outbound: {
      check: (url) => {
        const c = checkOutboundUrl(url, guard);
        return c.ok ? { ok: true } : c;
      },
      fetch: (url, init) => guardedFetch(url, init, guard),
    },
    async reportStatus(u) {
      const report = { provider: pluginName, providerMessageId: u.providerMessageId, kind: u.status, at: u.at, error: u.error };
      let r = await rt.deliveries.applyStatusReport(report);
      for (const wait of UNKNOWN_REPORT_RETRY_MS) {
        if (r) break;
        await new Promise((resolve) => setTimeout(resolve, wait));
        r = await rt.deliveries.applyStatusReport(report);
      }
      if (!r) {
        logger.warn({ providerMessageId: u.providerMessageId }, 'status report for an unknown message');
        return;
      }
      if (r.changed) wakeFeed(rt.nc);
      if (r.callbackId) wakeCallbacks(rt.nc, [r.callbackId], rt.logger);
    },
  };
}

/** Loads the configured providers with the worker's plugin context (the API role uses it for webhooks too). */
export async function loadConfiguredProviders(rt: Runtime): Promise<LoadedProviders> {
  checkProviderConfig(rt.config.providers, rt.config.providerConfig);
  return loadProviders(rt.config.providers, (pkg) => rt.config.providerConfig[pkg], (name) => pluginContext(rt, name));
}

/**
 * Runs the worker role: one send loop per channel, plus the sweeper jobs it owns: re-enqueuing
 * deliveries whose wake-up was lost (crash, JetStream store loss), which is what makes invariant 1
 * hold, and purging expired idempotency keys.
 */
export async function startWorker(rt: Runtime): Promise<WorkerRole> {
  const providers = await loadConfiguredProviders(rt);
  const chainOptions = { threshold: rt.config.failoverThreshold, cooldownMs: rt.config.failoverCooldownMs, sendTimeoutMs: sendTimeoutMs(rt.config.leaseMs), logger: rt.logger };
  const chains = new Map(CHANNELS.map((ch) => [ch, new ProviderChain(ch, providers.byChannel.get(ch)!, chainOptions)]));
  const sendSlots = CHANNELS.map(() => new Slots(rt.config.workerConcurrency));
  const loops = await Promise.all(
    CHANNELS.map((ch, i) => {
      const handler = sendHandler(rt, ch, chains.get(ch)!, sendSlots[i]!);
      const held = rt.config.workerConcurrency * MESSAGES_PER_SEND_SLOT;
      return consumeWorkQueue({
        js: rt.js, stream: SEND_STREAM, durable: sendConsumer(ch), concurrency: held, handle: handler, logger: rt.logger, redeclare: rt.redeclareTopology, onReconnect: rt.onNatsReconnect,
      });
    }),
  );

  const sweeper = startSweeper([requeueOverdueDeliveries(rt, rt.config.sweepGraceMs), purgeExpiredIdempotencyKeys(rt, rt.config.idempotencyTtlMs), collectUnusedMedia(rt, rt.config.mediaGraceMs)], rt.logger);

  return {
    providers,
    chains,
    async stop() {
      sweeper.stop();
      // Sends under way finish; held wake-ups that have not started go back to the queue.
      for (const s of sendSlots) s.close();
      await Promise.all(loops.map((l) => l.stop(10_000)));
      for (const c of chains.values()) c.close();
      await closeProviders(providers);
    },
  };
}

