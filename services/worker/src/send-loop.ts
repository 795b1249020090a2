import type { JsMsg } from '@nats-io/jetstream';
import { classifyError, type OutboundMessage } from '@ens/plugin-sdk';
import { nextRetryDelay, type Channel, type Runtime } from '@ens/core';
import {
  attemptsTotal, runInSlotOrRequeue, wakeCallbacks, wakeFeed, type AttemptResult, type ClaimedDelivery, type ClaimMiss, type Slots,
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

/**
 * Handles one wake-up from a channel's work queue. The message only names a delivery; the
 * delivery's row decides what happens, so duplicate or stale wake-ups are harmless.
 *
 * `slots` bounds the provider sends in flight. A slot is taken before the claim, so an attempt's
 * lease only starts once its send can begin (the send timeout is a share of the lease), and it is
 * given back as soon as the provider has answered: recording the outcome does not hold one.
 */
export function sendHandler(rt: Runtime, channel: Channel, chain: ProviderChain, slots: Slots) {
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
  return async (m: JsMsg): Promise<void> => {
    const id = m.string();
    const attempt = await runInSlotOrRequeue(slots, m, async (): Promise<ClaimMiss | { claim: ClaimedDelivery; result: AttemptResult }> => {
        const claim = await rt.deliveries.claim(id, chain.primary, rt.config.leaseMs);
        if ('reason' in claim) return claim;
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
