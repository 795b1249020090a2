import type { JsMsg } from '@nats-io/jetstream';
import {
  CALLBACK_CONSUMER, CALLBACK_STREAM, callbackPosts, ClientDirectory, consumeWorkQueue, sweeperRequeued, wakeCallbacks, type Runtime,
} from '@ens/core';
import { closeCallbackConnections, postCallback } from './delivery/poster.ts';
import { ensSignature, standardWebhookHeaders } from './delivery/signature.ts';

const LEASE_MS = 60_000;
const SWEEP_GRACE_MS = 30_000;
const SWEEP_EVERY_MS = 5_000;
const CONCURRENCY = 64;

export interface CallbacksRole {
  stop(): Promise<void>;
}

/**
 * Posts one queued callback. The body bytes were fixed when the delivery reached its terminal
 * state; each attempt signs those same bytes, with the same webhook-id and a fresh timestamp.
 */
function postHandler(rt: Runtime, directory: ClientDirectory) {
  return async (m: JsMsg): Promise<void> => {
    const claim = await rt.callbacks.claim(m.string(), LEASE_MS);
    if ('miss' in claim) {
      if (claim.miss === 'not_due') m.nak(claim.dueInMs);
      else m.ack();
      return;
    }
    const client = await directory.get(claim.clientId);
    const secret = client ? rt.clients.openCallbackSecret(client) : null;
    let result: { ok: boolean; httpStatus?: number; error?: string };
    if (secret === null) {
      result = { ok: false, error: 'the client has no callback secret' };
    } else {
      const rawBody = Buffer.from(claim.body, 'utf8');
      const out = await postCallback({
        url: claim.url,
        rawBody,
        headers: {
          'x-ens-signature': ensSignature(rawBody, secret),
          ...standardWebhookHeaders({ webhookId: claim.id, timestamp: new Date(), rawBody, secret }),
        },
        timeoutMs: rt.config.callbackTimeoutMs,
        allowPrivate: rt.config.allowPrivateCallbacks,
      });
      result = out.outcome === 'delivered' ? { ok: true, httpStatus: out.status } : { ok: false, httpStatus: out.status, error: out.error };
    }
    const schedule = rt.config.callbackBackoffMs;
    const retryIn = result.ok || secret === null || claim.attemptInRound > schedule.length ? null : schedule[claim.attemptInRound - 1]!;
    const status = await rt.callbacks.record(claim, result, retryIn);
    callbackPosts.inc({ result: status === 'pending' ? 'retry' : status });
    if (status === 'pending' && retryIn !== null) {
      m.nak(retryIn);
      return;
    }
    if (status === 'dead') rt.logger.warn({ callbackId: claim.id, deliveryId: claim.deliveryId, error: result.error }, 'callback moved to dead letters');
    m.ack();
  };
}

/** Runs the callbacks role: posts, retries on ENS_CALLBACK_BACKOFF, dead letters, and its sweeper. */
export async function startCallbacks(rt: Runtime): Promise<CallbacksRole> {
  const directory = new ClientDirectory(rt.db, rt.clients);
  await directory.start();
  const consumer = await consumeWorkQueue(rt.js, CALLBACK_STREAM, CALLBACK_CONSUMER, CONCURRENCY, postHandler(rt, directory), rt.logger);
  const sweep = async () => {
    try {
      const ids = await rt.callbacks.takeOverdue(SWEEP_GRACE_MS, 1000);
      if (ids.length > 0) {
        sweeperRequeued.inc({ kind: 'callback' }, ids.length);
        await wakeCallbacks(rt.js, ids, rt.logger);
      }
    } catch (err) {
      rt.logger.warn({ err }, 'callback sweep failed; will try again');
    }
  };
  const timer = setInterval(() => void sweep(), SWEEP_EVERY_MS);
  void sweep();
  return {
    async stop() {
      clearInterval(timer);
      await consumer.stop(rt.config.callbackTimeoutMs + 1000);
      await directory.close();
      await closeCallbackConnections();
    },
  };
}
