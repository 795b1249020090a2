import { setTimeout as delay } from 'node:timers/promises';
import type { JsMsg } from '@nats-io/jetstream';
import type { OutboundMessage } from '@ens/plugin-sdk';
import {
  CHANNEL_RULES,
  decideSendRetry,
  returnPathFor,
  signDeliveryToken,
  unsubscribeMailtoFor,
  type Channel,
  type Runtime,
} from '@ens/core';
import {
  ACK_WAIT_MS,
  attemptsTotal,
  suppressedSends,
  endAttemptSpan,
  FairSlots,
  handBack,
  isRedelivered,
  parseSendWakeup,
  recordOutcome,
  startAttemptSpan,
  traceparentOf,
  type AttemptResult,
  type ClaimedDelivery,
  type ClaimMiss,
  type Flow,
  type ProviderPacer,
  type SchedulingPolicy,
} from '@ens/core/internal';
import { ChainSendError, type ProviderChain } from './provider-chain.ts';
import { sendToDevices } from './push-fanout.ts';

/** How long a refusal's suppression entry may hold up the outcome (see record()). */
const REFUSAL_ENTRY_WAIT_MS = 5_000;

/**
 * What ENS adds to an email for consent: its signed return path, and for bulk mail the one-click
 * unsubscribe.
 */
function emailConsent(
  rt: Runtime,
  d: ClaimedDelivery,
): Pick<OutboundMessage, 'returnPath' | 'unsubscribe'> {
  if (d.channel !== 'email') return {};
  const domain = rt.config.consent.returnPathDomain;
  const out: Pick<OutboundMessage, 'returnPath' | 'unsubscribe'> = {};
  if (domain) out.returnPath = returnPathFor(rt.consentKey, domain, d.id);
  if (d.bulk) {
    out.unsubscribe = {
      url: `${rt.config.publicUrl}/unsubscribe/${signDeliveryToken(rt.consentKey, 'unsubscribe', d.id)}`,
      mailto: domain
        ? `mailto:${unsubscribeMailtoFor(rt.consentKey, domain, d.id)}?subject=unsubscribe`
        : null,
    };
  }
  return out;
}

function outbound(rt: Runtime, d: ClaimedDelivery): OutboundMessage {
  return {
    ...emailConsent(rt, d),
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

/** What a channel's send loop needs to share its slots: the operator's policy and the pacer. */
export interface SendScheduling {
  policy: SchedulingPolicy;
  pacer: ProviderPacer;
  /** Send slots of this channel in this process (ENS_WORKER_CONCURRENCY). */
  slots: number;
}

/** A wake-up the loop holds: waiting for a slot, then being sent, then recorded. */
interface Held {
  m: JsMsg;
  id: string;
  /** When it was taken in, or last marked in progress. */
  since: number;
  /** Ends the message's turn in the consume loop (it has been acked or nak'ed). */
  done: () => void;
}

export interface SendLoop {
  handle: (m: JsMsg) => Promise<void>;
  slots: FairSlots<Held>;
  /** Stops taking new sends; held wake-ups go back to the queue. */
  close(): void;
}

/**
 * The send loop of one channel. Each wake-up names a delivery and its flow; the delivery's row
 * decides what happens, so duplicate or stale wake-ups are harmless.
 *
 * The slots bound the provider sends in flight. A wake-up waits for a slot in its flow (client,
 * tenant, or the client's priority lane), and a freed slot goes to the next flow in fair order, so
 * a client with one message does not wait behind another's backlog held by this loop. A
 * redelivered wake-up (a retry that was due, or one a stopped worker gave back) waits at the front
 * of its flow. Held wake-ups are marked in progress before their ack deadline, so that one waiting
 * behind a slow or paced provider is not delivered a second time.
 *
 * A slot is taken before the claim, so an attempt's lease only starts once its send can begin (the
 * send timeout is a share of the lease), and it is given back as soon as the provider has
 * answered: recording the outcome does not hold one. A paced provider's send time is reserved
 * before the claim too, so that waiting for the pace never eats into a lease; the claim is made in
 * the last moments before it, and the send then waits for its exact time.
 */
export function sendLoop(
  rt: Runtime,
  channel: Channel,
  chain: ProviderChain,
  scheduling: SendScheduling,
): SendLoop {
  // The retry policy (core's retry-policy.ts) turns a provider's error into the attempt's outcome.
  const decideFor = (claim: ClaimedDelivery) => (err: unknown, provider: string) =>
    decideSendRetry(err, claim.attempt, rt.config.retryBackoffMs, provider);
  const sendOne = async (claim: ClaimedDelivery): Promise<AttemptResult> => {
    try {
      const { provider, result } = await chain.send(outbound(rt, claim));
      return { outcome: 'sent', provider, providerMessageId: result.providerMessageId };
    } catch (err) {
      if (err instanceof ChainSendError) return decideFor(claim)(err.causeValue, err.provider);
      throw err;
    }
  };
  // A channel whose recipient is a user (push) sends to each of their registered devices, when the
  // chain's plugins send to devices.
  const toDevices = CHANNEL_RULES[channel].fansOutToDevices && chain.sendsToDevices;
  const { policy, pacer } = scheduling;

  const failed = (h: Held, err: unknown) => {
    rt.logger.warn({ err, channel }, 'send failed; redelivering');
    h.m.nak(1000);
    h.done();
  };

  // After the slot is given back: the versioned outcome, then ack, or nak for a retry.
  // `traceparent` is the attempt's span, for the callback the outcome may queue.
  const record = async (
    h: Held,
    claim: ClaimedDelivery,
    claimedAt: number,
    result: AttemptResult,
    traceparent: string | null,
  ) => {
    // The provider asked for a pause: a paced provider gets it from every worker, not just this
    // send.
    if (result.outcome === 'retry' && result.kind === 'rate_limited')
      pacer.slowDown(result.provider, result.delayMs);
    attemptsTotal.inc({
      channel,
      provider: result.provider,
      outcome: result.outcome === 'sent' ? 'sent' : result.kind,
    });
    // A refusal about the recipient (an unknown mailbox, a number that opted out) suppresses the
    // address too, so that later sends to it are not made. Before the outcome, so that whoever
    // sees the delivery failed (its callback's receiver, a reader of the record) finds the entry.
    // The refusal happened whether or not the outcome is recorded; if this write is lost, the
    // next send meets the same refusal and writes it again. The wait is bounded: a PostgreSQL
    // that does not answer must not hold the outcome past its lease.
    if (result.outcome === 'failed' && result.recipientRefusal) {
      const entry = rt.suppressions
        .upsert(claim.clientId, [
          {
            tenant: claim.tenant,
            channel: claim.channel,
            address: claim.recipient,
            scope: result.recipientEventTypeOnly ? claim.eventType : '*',
            reason: result.recipientRefusal,
            source: 'provider',
            provider: result.provider,
            deliveryId: claim.id,
            detail: result.error,
          },
        ])
        .catch((err: unknown) =>
          rt.logger.warn(
            { err, deliveryId: claim.id },
            'could not record the refused recipient as suppressed',
          ),
        );
      await Promise.race([entry, delay(REFUSAL_ENTRY_WAIT_MS, undefined, { ref: false })]);
    }
    // While PostgreSQL is away the outcome is kept and tried again until the lease runs out
    // (outcome-retry.ts); only then is the message nak'ed, the attempt retried and the unrecorded
    // one marked lost. The store wakes the feed, and the callbacks role for a callback the outcome
    // queued, after its commit.
    const t = await recordOutcome(() => rt.deliveries.finish(claim, result, traceparent), {
      deadline: claimedAt + rt.config.leaseMs,
      keepAlive: () => h.m.working(),
      logger: rt.logger,
      context: { deliveryId: claim.id, channel },
    });
    if (t === null) {
      // The version moved on: the claim was ended (its lease ran out, or its session was found
      // dead), or lost with the commits a PostgreSQL crash or failover dropped (claims commit
      // asynchronously). In that last case nothing else would wake the delivery before the sweeper:
      // the wake-up goes back, and its redelivery is a miss unless the delivery is still due.
      h.m.nak();
    } else if (t.status === 'pending' && result.outcome === 'retry') {
      h.m.nak(result.delayMs);
    } else {
      h.m.ack();
    }
    h.done();
  };

  const slots = new FairSlots<Held>(
    scheduling.slots,
    {
      async start(h) {
        let claim: ClaimedDelivery;
        let result: AttemptResult;
        let span: ReturnType<typeof startAttemptSpan> = null;
        let claimedAt = 0;
        try {
          const sendAt = await pacer.take(chain.primary);
          claimedAt = Date.now();
          const c = await rt.deliveries.claim(h.id, chain.primary, rt.config.leaseMs);
          if ('reason' in c) {
            missed(h, c);
            return;
          }
          claim = c;
          await pacer.sendAt(chain.primary, sendAt);
          span = startAttemptSpan(claim);
          result = toDevices
            ? await sendToDevices(rt, chain, claim, outbound(rt, claim), decideFor(claim))
            : await sendOne(claim);
        } catch (err) {
          if (span) endAttemptSpan(span, err instanceof Error ? err : new Error(String(err)));
          failed(h, err);
          return;
        }
        let traceparent: string | null = null;
        if (span) {
          endAttemptSpan(span, result);
          traceparent = traceparentOf(span);
        }
        void record(h, claim, claimedAt, result, traceparent).catch((err: unknown) =>
          failed(h, err),
        );
      },
      cancel(h) {
        // Stopping: never claimed, so it goes straight back to the queue for another process
        // (hand-back.ts says why not by a nak). Its turn ends once it is back, so that the
        // process's stop waits for it.
        void handBack(rt.js, h.m, rt.logger).finally(h.done);
      },
    },
    policy.weights,
  );

  const missed = (h: Held, miss: ClaimMiss) => {
    if (miss.reason === 'suppressed') {
      // Consent stops it: failed without any provider call, and its callback queued (the store
      // wakes the feed and the callbacks role after its commit).
      rt.deliveries.failSuppressed(h.id, miss.hit).then(
        () => {
          suppressedSends.inc({ channel, reason: miss.hit.reason });
          h.m.ack();
          h.done();
        },
        (err: unknown) => failed(h, err),
      );
      return;
    }
    if (miss.reason === 'not_due') h.m.nak(miss.dueInMs);
    else h.m.ack();
    h.done();
  };

  const keepAlive = setInterval(() => {
    const due = Date.now() - ACK_WAIT_MS / 2;
    for (const h of slots.items()) {
      if (h.since > due) continue;
      h.m.working();
      h.since = Date.now();
    }
  }, ACK_WAIT_MS / 4);
  keepAlive.unref();

  return {
    slots,
    handle: (m) =>
      new Promise<void>((done) => {
        const w = parseSendWakeup(m.string());
        const flow: Flow = {
          client: w.clientId,
          tenant: w.tenant,
          priority: policy.isPriority(w.clientId, w.eventType),
        };
        slots.submit(flow, { m, id: w.id, since: Date.now(), done }, isRedelivered(m));
      }),
    close() {
      clearInterval(keepAlive);
      slots.close();
    },
  };
}
