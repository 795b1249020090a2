import type { JsMsg } from '@nats-io/jetstream';
import { classifyError, type OutboundMessage } from '@ens/plugin-sdk';
import { nextRetryDelay, type Channel, type Runtime } from '@ens/core';
import {
  attemptsTotal, parseSendWakeup, runInSlotOrRequeue, wakeCallbacks, wakeFeed, type AttemptResult, type ClaimedDelivery, type ClaimMiss, type FairSlots, type Flow,
  type ProviderPacer, type SchedulingPolicy, type WaitingMessages,
} from '@ens/core/internal';
import { ChainSendError, type ProviderChain } from './provider-chain.ts';
import { sendToDevices } from './push-fanout.ts';

/**
 * A provider call that has not answered within this share of the lease is treated as a transient
 * failure, so the lease always outlives the send and a slow send is never handed to a second worker.
 */
const SEND_SHARE_OF_LEASE = 0.8;
const MAX_SEND_TIMEOUT_MS = 30_000;

export function sendTimeoutMs(leaseMs: number): number {
  return Math.min(MAX_SEND_TIMEOUT_MS, leaseMs * SEND_SHARE_OF_LEASE);
}

/** Turns a provider's thrown error into the next step, using the retry schedule. */
export function decide(err: unknown, attempt: number, backoffMs: readonly number[], provider: string): AttemptResult {
  const { kind, message, retryAfterMs } = classifyError(err);
  if (kind === 'permanent') return { outcome: 'failed', provider, error: message, kind };
  const scheduled = nextRetryDelay(backoffMs, attempt);
  if (scheduled === null) {
    return { outcome: 'failed', provider, error: `${message} (gave up after ${attempt} attempts)`, kind };
  }
  const delayMs = kind === 'rate_limited' && retryAfterMs !== undefined ? Math.max(retryAfterMs, 0) : scheduled;
  return { outcome: 'retry', provider, error: message, delayMs, kind };
}

function outbound(d: ClaimedDelivery): OutboundMessage {
  return {
    deliveryId: d.id,
    attempt: d.attempt,
    channel: d.channel,
    recipient: d.recipient,
    tenant: d.tenant,
    tenantSettings: d.tenantSettings,
    eventType: d.eventType,
    reference: d.reference,
    content: d.content,
  };
}

/** How the send loop of one channel shares its slots: fairly across flows, with held wake-ups kept alive. */
export interface SendScheduling {
  slots: FairSlots;
  policy: SchedulingPolicy;
  waiting: WaitingMessages;
  pacer: ProviderPacer;
}

/**
 * Handles one wake-up from a channel's work queue. The message names a delivery and its flow; the
 * delivery's row decides what happens, so duplicate or stale wake-ups are harmless.
 *
 * `slots` bounds the provider sends in flight. A wake-up waits for a slot in its flow (client,
 * tenant, or the client's priority lane), and a freed slot goes to the next flow in fair order, so
 * a client with one message does not wait behind another's backlog held by this loop. A
 * redelivered wake-up (a retry that was due, or one a stopped worker gave back) waits at the front
 * of its flow. A slot is taken before the claim, so an attempt's lease only starts once its send
 * can begin (the send timeout is a share of the lease), and it is given back as soon as the
 * provider has answered: recording the outcome does not hold one. A paced provider's send time is
 * reserved before the claim too, so that waiting for the pace never eats into a lease; the claim
 * is made in the last few milliseconds before it, and the send then waits for its exact time.
 */
export function sendHandler(rt: Runtime, channel: Channel, chain: ProviderChain, scheduling: SendScheduling) {
  const decideFor = (claim: ClaimedDelivery) => (err: unknown, provider: string) => decide(err, claim.attempt, rt.config.retryBackoffMs, provider);
  const sendOne = async (claim: ClaimedDelivery): Promise<AttemptResult> => {
    try {
      const { provider, result } = await chain.send(outbound(claim));
      return { outcome: 'sent', provider, providerMessageId: result.providerMessageId };
    } catch (err) {
      if (err instanceof ChainSendError) return decideFor(claim)(err.causeValue, err.provider);
      throw err;
    }
  };
  const toDevices = channel === 'push' && chain.sendsToDevices;
  const { slots, policy, waiting, pacer } = scheduling;
  return async (m: JsMsg): Promise<void> => {
    const wakeup = parseSendWakeup(m.string());
    const id = wakeup.id;
    const flow: Flow = { client: wakeup.clientId, tenant: wakeup.tenant, priority: policy.isPriority(wakeup.clientId, wakeup.eventType) };
    const started = waiting.hold(m);
    const inFlow = { run: <T>(fn: () => Promise<T>) => slots.run(flow, fn, m.info.deliveryCount > 1).finally(started) };
    const attempt = await runInSlotOrRequeue(inFlow, m, async (): Promise<ClaimMiss | { claim: ClaimedDelivery; result: AttemptResult }> => {
        started();
        const sendAt = await pacer.take(chain.primary);
        const claim = await rt.deliveries.claim(id, chain.primary, rt.config.leaseMs);
        if ('reason' in claim) return claim;
        await pacer.sendAt(chain.primary, sendAt);
        const result = toDevices ? await sendToDevices(rt, chain, claim, outbound(claim), decideFor(claim)) : await sendOne(claim);
        return { claim, result };
      });
    if (attempt === undefined) return;
    if ('reason' in attempt) {
      if (attempt.reason === 'not_due') m.nak(attempt.dueInMs);
      else m.ack();
      return;
    }
    const { claim, result } = attempt;
    // The provider asked for a pause: a paced provider gets it from every worker, not just this send.
    if (result.outcome === 'retry' && result.kind === 'rate_limited') pacer.slowDown(result.provider, result.delayMs);
    attemptsTotal.inc({ channel, provider: result.provider, outcome: result.outcome === 'sent' ? 'sent' : result.kind });
    // If recording fails (PostgreSQL down), the throw naks the message; the lease then runs out and
    // the attempt is retried and the unrecorded one marked lost.
    const t = await rt.deliveries.finish(claim, result);
    wakeFeed(rt.nc);
    if (t?.status === 'pending' && result.outcome === 'retry') {
      m.nak(result.delayMs);
      return;
    }
    m.ack();
    if (t?.callbackId) wakeCallbacks(rt.nc, [t.callbackId], rt.logger);
  };
}
