import {
  CHANNELS,
  checkOutboundUrl,
  guardedFetch,
  sendTimeoutMs,
  type Channel,
  type Runtime,
} from '@ens/core';
import {
  consumeWorkQueue,
  ProviderPacer,
  SchedulingPolicy,
  SEND_LANES,
  SEND_STREAM,
  sendConsumer,
  sendWaiting,
  startJobs,
  suppressionReports,
  workerJobs,
  type Pace,
} from '@ens/core/internal';
import type { PluginContext } from '@ens/plugin-sdk';
import { ProviderChain } from './provider-chain.ts';
import {
  checkProviderConfig,
  closeProviders,
  loadProviders,
  pluginImporter,
  type LoadedProviders,
} from './provider-loader.ts';
import { sendLoop, type SendLoop } from './send-loop.ts';

/**
 * Wake-ups a channel's loop asks the server for at a time, per send slot (ENS_WORKER_CONCURRENCY).
 * The loop holds up to ENS_SEND_WINDOW wake-ups, to choose among them fairly, but pulls them in
 * batches this size, so that worker processes sharing a backlog each get part of it.
 */
const PULL_PER_SEND_SLOT = 4;
/**
 * Wake-ups a channel's loop holds from the lane of small sends (at most ENS_SEND_WINDOW). That lane
 * is read as fast as it fills, so it rarely holds many; the bound only caps its memory (about 4 KB
 * each) beside the bulk lane's ENS_SEND_WINDOW.
 */
const NEXT_LANE_WINDOW = 10_000;

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
      const report = {
        provider: pluginName,
        providerMessageId: u.providerMessageId,
        kind: u.status,
        at: u.at,
        error: u.error,
      };
      let r = await rt.deliveries.applyStatusReport(report);
      for (const wait of UNKNOWN_REPORT_RETRY_MS) {
        if (r) break;
        await new Promise((resolve) => setTimeout(resolve, wait));
        r = await rt.deliveries.applyStatusReport(report);
      }
      // The store wakes the feed and the callbacks role after the report's commit.
      if (!r)
        logger.warn(
          { providerMessageId: u.providerMessageId },
          'status report for an unknown message',
        );
    },
    async reportRecipient(r) {
      suppressionReports.inc({ source: 'provider', kind: r.kind });
      if (r.providerMessageId !== undefined) {
        const find = { provider: pluginName, providerMessageId: r.providerMessageId };
        const report = {
          kind: r.kind,
          source: 'provider' as const,
          provider: pluginName,
          detail: r.detail,
          at: r.at,
          scopeToEventType: r.eventTypeOnly === true,
        };
        // As for status reports: the report may overtake the send's record of its message id.
        // Through core's door, which wakes the feed when the report marks the delivery.
        let res = await rt.suppressions.reportForDelivery(find, report);
        for (const wait of UNKNOWN_REPORT_RETRY_MS) {
          if (res) break;
          await new Promise((resolve) => setTimeout(resolve, wait));
          res = await rt.suppressions.reportForDelivery(find, report);
        }
        if (!res) {
          logger.warn(
            { providerMessageId: r.providerMessageId, kind: r.kind },
            'recipient report for an unknown message',
          );
          return { entries: 0 };
        }
        return { entries: res.entries };
      }
      if (r.address === undefined || r.channel === undefined) {
        logger.warn(
          { kind: r.kind },
          'recipient report names neither a message nor an address and channel',
        );
        return { entries: 0 };
      }
      return rt.suppressions.reportForAddress({
        kind: r.kind,
        provider: pluginName,
        channel: r.channel,
        address: r.address,
        sender: r.sender,
        detail: r.detail,
      });
    },
  };
}

/**
 * Loads the configured providers with the worker's plugin context (the API role uses it for
 * webhooks too).
 */
export async function loadConfiguredProviders(rt: Runtime): Promise<LoadedProviders> {
  checkProviderConfig(rt.config.providers, rt.config.providerConfig);
  return loadProviders(
    rt.config.providers,
    (pkg) => rt.config.providerConfig[pkg],
    (name) => pluginContext(rt, name),
    pluginImporter(rt.config.pluginDir),
  );
}

/**
 * Each loaded provider's pace: the operator's (ENS_PROVIDER_PACE, by package) or the plugin's own.
 */
function providerPaces(rt: Runtime, providers: LoadedProviders): Map<string, Pace> {
  const paces = new Map<string, Pace>();
  for (const p of providers.all) {
    const pace = rt.config.providerPace.get(p.pkg) ?? p.provider.pace;
    if (pace && pace.perSecond > 0) paces.set(p.name, { perSecond: pace.perSecond });
  }
  return paces;
}

/** ens_send_waiting: the wake-ups each channel's loop holds for a slot, per client. */
function reportWaiting(sends: readonly SendLoop[]): void {
  sendWaiting.reset();
  for (const [i, s] of sends.entries()) {
    const byClient = new Map<string, number>();
    for (const b of s.slots.backlog())
      byClient.set(b.client, (byClient.get(b.client) ?? 0) + b.waiting);
    for (const [client, n] of byClient)
      sendWaiting.set({ channel: CHANNELS[i]!, client: client || 'unknown' }, n);
  }
}

/**
 * Runs the worker role: one send loop per channel, plus the sweeper jobs it owns: re-enqueuing
 * deliveries whose wake-up was lost (crash, JetStream store loss), which is what makes invariant 1
 * hold, and purging expired idempotency keys.
 */
export async function startWorker(rt: Runtime): Promise<WorkerRole> {
  const providers = await loadConfiguredProviders(rt);
  const chainOptions = {
    threshold: rt.config.failoverThreshold,
    cooldownMs: rt.config.failoverCooldownMs,
    sendTimeoutMs: sendTimeoutMs(rt.config.leaseMs),
    logger: rt.logger,
  };
  const chains = new Map(
    CHANNELS.map((ch) => [ch, new ProviderChain(ch, providers.byChannel.get(ch)!, chainOptions)]),
  );
  const policy = new SchedulingPolicy(rt.db);
  await policy.start(5_000, (err) =>
    rt.logger.warn({ err }, 'reading the scheduling settings failed; keeping the previous ones'),
  );
  const pacer = new ProviderPacer(rt.db, providerPaces(rt, providers));
  // Claims record this process's session, so that they are retried at once if it dies.
  await rt.session.start();
  const sends = CHANNELS.map((ch) =>
    sendLoop(rt, ch, chains.get(ch)!, { policy, pacer, slots: rt.config.workerConcurrency }),
  );
  const gauges = setInterval(() => reportWaiting(sends), 5_000);
  gauges.unref();
  // Both lanes of a channel feed its one send loop, which chooses among all it holds fairly.
  const loops = await Promise.all(
    CHANNELS.flatMap((ch, i) =>
      SEND_LANES.map((lane) =>
        consumeWorkQueue({
          js: rt.js,
          stream: SEND_STREAM,
          durable: sendConsumer(ch, lane),
          concurrency:
            lane === 'bulk'
              ? rt.config.sendWindow
              : Math.min(rt.config.sendWindow, NEXT_LANE_WINDOW),
          pullBatch: rt.config.workerConcurrency * PULL_PER_SEND_SLOT,
          handle: sends[i]!.handle,
          logger: rt.logger,
          redeclare: rt.redeclareTopology,
          onReconnect: rt.onNatsReconnect,
          nc: rt.nc,
          onLeaderElected: () => rt.deliveries.afterLeaderChange(ch),
        }),
      ),
    ),
  );

  // The delivery sweep, the end of dead processes' claims and the keeping of the record (core's
  // jobs/catalogue.ts).
  const jobs = startJobs(workerJobs(rt), rt.logger);

  return {
    providers,
    chains,
    async stop() {
      // A pass under way finishes on its own; stopping does not wait for it.
      void jobs.stop();
      clearInterval(gauges);
      // Pulling stops first, on the server too, so that the wake-ups handed back next go to
      // other processes rather than to this one's last pulls (work-queue.ts). Sends under way
      // finish; held wake-ups that have not started go back to the queue.
      await Promise.all(loops.map((l) => l.stopIntake()));
      for (const s of sends) s.close();
      pacer.close();
      await Promise.all(loops.map((l) => l.stop(10_000)));
      // Ends the session (with the other claiming role's stop): sends cut off by the grace are
      // ended and woken at once rather than after their lease.
      await rt.session.stop(rt.reaper);
      policy.stop();
      for (const c of chains.values()) c.close();
      await closeProviders(providers);
    },
  };
}
