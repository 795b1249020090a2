import type { JsMsg } from '@nats-io/jetstream';
import { callbackLeaseMs, decideCallbackRetry, type ClientRow, type Runtime } from '@ens/core';
import {
  CALLBACK_CONSUMER,
  CALLBACK_STREAM,
  callbackPosts,
  callbacksDeferred,
  callbacksJobs,
  ClientDirectory,
  closeOutboundConnections,
  consumeWorkQueue,
  endCallbackPostSpan,
  parseCallbackWakeup,
  recordOutcome,
  startCallbackPostSpan,
  startJobs,
  traceparentOf,
  type CallbackClaim,
  type ClaimedCallback,
  type InProcessPoster,
  type PostResult,
} from '@ens/core/internal';
import { postCallback } from './post/poster.ts';
import { ensSignature, standardWebhookHeaders } from './post/signature.ts';
import { PostDeferred, PostSlots, SlotsClosedError, type ReceiverTimer } from './post-slots.ts';

/** Posts in flight at once. */
const POST_SLOTS = 256;
/**
 * Posts in flight at once for one client: what a receiver saw before the slots were shared, and
 * what a client whose receiver hangs can hold, so three such clients still leave a quarter free.
 */
const POSTS_PER_CLIENT = 64;
/**
 * Wake-ups held per post slot, so claims and records batch across more handlers (see the worker).
 */
const MESSAGES_PER_POST_SLOT = 4;
/** How the post slots treat a client whose receiver is slow (see post-slots.ts). */
const SLOW_RECEIVER = {
  /**
   * A post that takes this long is slow: a receiver that answers sooner frees its slots soon
   * enough.
   */
  slowPostMs: 1_000,
  /**
   * A wake-up that would wait longer than this behind its own client's slow posts goes back to the
   * queue...
   */
  maxWaitMs: 2_000,
  /**
   * ...for about that wait, at most this long, so that a receiver that recovers is soon posted to
   * again.
   */
  maxDeferMs: 60_000,
};
/** How often the parked posts are checked against SLOW_RECEIVER.maxWaitMs. */
const DEFER_CHECK_MS = 1_000;

export interface CallbacksRole {
  stop(): Promise<void>;
}

/**
 * The signature headers for one post, or why the callback cannot be signed. Never throws: a secret
 * that cannot be opened (sealed under another master key) must end in a dead letter, not in a
 * handler that throws and is redelivered for ever.
 */
function signingHeaders(
  rt: Runtime,
  client: ClientRow | null,
  webhookId: string,
  rawBody: Buffer,
): { headers: Record<string, string> } | { error: string } {
  if (!client) return { error: 'the client no longer exists' };
  let secret: string | null;
  try {
    secret = openSecret(rt, client);
  } catch {
    return {
      error:
        'the callback secret cannot be decrypted: it was sealed under another master key ' +
        '(check ENS_MASTER_KEY and ENS_DATA_DIR) or is damaged',
    };
  }
  if (secret === null) return { error: 'the client has no callback secret' };
  try {
    return {
      headers: {
        'x-ens-signature': ensSignature(rawBody, secret),
        ...standardWebhookHeaders({ webhookId, timestamp: new Date(), rawBody, secret }),
      },
    };
  } catch (e) {
    return { error: `the callback secret cannot sign: ${(e as Error).message}` };
  }
}

/**
 * Opened callback secrets, per client row object. The ClientDirectory hands out the same row until
 * the client changes (it then loads a new one), so a rotated secret is never served from here; the
 * entry goes with the row.
 */
const openedSecrets = new WeakMap<ClientRow, string | null>();

function openSecret(rt: Runtime, client: ClientRow): string | null {
  let secret = openedSecrets.get(client);
  if (secret === undefined) {
    secret = rt.clients.openCallbackSecret(client);
    openedSecrets.set(client, secret);
  }
  return secret;
}

/** A claimed callback's post: its result, and whether it could be signed at all. */
interface Posted {
  claim: ClaimedCallback;
  result: PostResult;
  signed: boolean;
}

/**
 * Signs and posts one claimed callback, in its post slot. The body bytes were fixed when the
 * delivery reached its terminal state; each attempt signs those same bytes, with the same
 * webhook-id and a fresh timestamp.
 */
async function signAndPost(
  rt: Runtime,
  directory: ClientDirectory,
  receiver: ReceiverTimer,
  claim: ClaimedCallback,
): Promise<Posted> {
  const rawBody = Buffer.from(claim.body, 'utf8');
  const signing = signingHeaders(rt, await directory.get(claim.clientId), claim.id, rawBody);
  if ('error' in signing)
    return { claim, result: { ok: false, error: signing.error }, signed: false };
  // The post's own span, and its traceparent on the request: the receiver's handler joins the
  // trace as its child.
  const span = startCallbackPostSpan(claim);
  const traceparent = span && traceparentOf(span);
  receiver.begin();
  const out = await postCallback({
    url: claim.url,
    rawBody,
    headers: traceparent ? { ...signing.headers, traceparent } : signing.headers,
    timeoutMs: rt.config.callbackTimeoutMs,
    allowPrivate: rt.config.allowPrivateCallbacks,
  });
  if (span) endCallbackPostSpan(span, out);
  const result =
    out.outcome === 'delivered'
      ? { ok: true, httpStatus: out.status }
      : { ok: false, httpStatus: out.status, error: out.error };
  return { claim, result, signed: true };
}

/**
 * Records a post (core's retry policy decides what a failure becomes) and counts it. While
 * PostgreSQL is away the result is kept and tried again until the lease runs out
 * (outcome-retry.ts), rather than left to the lease; the record is versioned by attempt.
 */
async function recordPost(
  rt: Runtime,
  { claim, result, signed }: Posted,
  deadline: number,
  keepAlive: () => void,
): Promise<{ status: 'delivered' | 'pending' | 'dead'; retryIn: number | null }> {
  // Null for a delivered post, and for the dead letters (schedule spent, or a callback that
  // cannot be signed).
  const retryIn = decideCallbackRetry(
    { ok: result.ok, signed },
    claim.attemptInRound,
    rt.config.callbackBackoffMs,
  );
  const status = await recordOutcome(() => rt.callbacks.record(claim, result, retryIn), {
    deadline,
    keepAlive,
    logger: rt.logger,
    context: { callbackId: claim.id, deliveryId: claim.deliveryId },
  });
  callbackPosts.inc({ result: status === 'pending' ? 'retry' : status });
  if (status === 'dead')
    rt.logger.warn(
      { callbackId: claim.id, deliveryId: claim.deliveryId, error: result.error },
      'callback moved to dead letters',
    );
  return { status, retryIn };
}

/** Posts one queued callback, woken through NATS: claimed here, once its post slot is free. */
function postHandler(rt: Runtime, directory: ClientDirectory, slots: PostSlots) {
  const leaseMs = callbackLeaseMs(rt.config.leaseMs, rt.config.callbackTimeoutMs);
  return async (m: JsMsg): Promise<void> => {
    const wakeup = parseCallbackWakeup(m.string());
    const deferMs = slots.deferral(wakeup.clientId);
    if (deferMs > 0) return handBack(rt, m, wakeup.id, deferMs);
    // A post slot is taken before the claim, so the lease starts only once the post can begin, and
    // given back when the post has answered: recording it does not hold one.
    let claimedAt = 0;
    const posted = await inPostSlot(
      rt,
      slots,
      wakeup.id,
      wakeup.clientId,
      m,
      async (receiver): Promise<Exclude<CallbackClaim, ClaimedCallback> | Posted> => {
        claimedAt = Date.now();
        const claim = await rt.callbacks.claim(wakeup.id, leaseMs);
        if ('miss' in claim) return claim;
        return signAndPost(rt, directory, receiver, claim);
      },
    );
    if (posted === undefined) return;
    if ('miss' in posted) {
      if (posted.miss === 'not_due') m.nak(posted.dueInMs);
      else m.ack();
      return;
    }
    const { status, retryIn } = await recordPost(rt, posted, claimedAt + leaseMs, () =>
      m.working(),
    );
    if (status === 'pending' && retryIn !== null) {
      m.nak(retryIn);
      return;
    }
    m.ack();
  };
}

/**
 * This role as the poster of the callbacks that deliveries ending in this process queue
 * (InProcessPoster, DeliveryStore.postCallbacksHere): each comes claimed by the outcome that
 * queued it, with no wake-up, and takes only a client's post that would start soon, since its
 * lease already runs. One whose post cannot start (the role stopping, its receiver turned slow)
 * is given back and woken for whichever process takes it; a retry's wake-up comes from its record.
 */
function inProcessPoster(
  rt: Runtime,
  directory: ClientDirectory,
  slots: PostSlots,
): InProcessPoster {
  const leaseMs = callbackLeaseMs(rt.config.leaseMs, rt.config.callbackTimeoutMs);
  const post = async (claim: ClaimedCallback): Promise<void> => {
    // The lease began at the outcome's commit, a moment before this.
    const claimedAt = Date.now();
    let posted: Posted;
    try {
      posted = await slots.run(claim.clientId, (receiver) =>
        signAndPost(rt, directory, receiver, claim),
      );
    } catch (err) {
      if (err instanceof PostDeferred) callbacksDeferred.inc();
      else if (!(err instanceof SlotsClosedError)) throw err;
      await rt.callbacks.release(claim);
      return;
    }
    await recordPost(rt, posted, claimedAt + leaseMs, () => {});
  };
  return {
    leaseMs,
    takes: (clientId) => slots.startsSoon(clientId),
    post(claim) {
      post(claim).catch((err: unknown) =>
        rt.logger.error(
          { err, callbackId: claim.id },
          'an in-process callback post failed; its lease will run out and it will be posted again',
        ),
      );
    },
  };
}

/**
 * Puts a wake-up back in the queue for `delayMs`, and keeps the sweeper off its callback meanwhile
 * (a failure to do so only costs a spare wake-up later).
 */
function handBack(rt: Runtime, m: JsMsg, callbackId: string, delayMs: number): void {
  m.nak(delayMs);
  callbacksDeferred.inc();
  rt.callbacks
    .holdOff(callbackId, delayMs)
    .catch((err: unknown) =>
      rt.logger.debug({ err, callbackId }, 'could not hold the sweeper off a deferred callback'),
    );
}

/**
 * Runs fn in the client's post slot. A wake-up whose post never started goes back to the queue:
 * at once when the role is stopping (for another process), after its expected wait when the slots
 * handed it back. Returns undefined then.
 */
async function inPostSlot<T>(
  rt: Runtime,
  slots: PostSlots,
  callbackId: string,
  client: string,
  m: JsMsg,
  fn: (receiver: ReceiverTimer) => Promise<T>,
): Promise<T | undefined> {
  try {
    return await slots.run(client, fn);
  } catch (err) {
    if (err instanceof SlotsClosedError) m.nak();
    else if (err instanceof PostDeferred) handBack(rt, m, callbackId, err.delayMs);
    else throw err;
    return undefined;
  }
}

/**
 * Runs the callbacks role: posts, retries on ENS_CALLBACK_BACKOFF, dead letters, and its sweeper.
 */
export async function startCallbacks(rt: Runtime): Promise<CallbacksRole> {
  const directory = new ClientDirectory(rt.db, rt.clients);
  await directory.start();
  // Claims record this process's session, so that they are retried at once if it dies.
  await rt.session.start();
  const slots = new PostSlots({ size: POST_SLOTS, perClient: POSTS_PER_CLIENT, ...SLOW_RECEIVER });
  const handler = postHandler(rt, directory, slots);
  // Deliveries that end in this process hand their callbacks straight to these slots.
  rt.deliveries.postCallbacksHere(inProcessPoster(rt, directory, slots));
  const consumer = await consumeWorkQueue({
    js: rt.js,
    stream: CALLBACK_STREAM,
    durable: CALLBACK_CONSUMER,
    concurrency: POST_SLOTS * MESSAGES_PER_POST_SLOT,
    handle: handler,
    logger: rt.logger,
    redeclare: rt.redeclareTopology,
    onReconnect: rt.onNatsReconnect,
    nc: rt.nc,
    onLeaderElected: () => rt.callbacks.afterLeaderChange(),
  });
  // Wake-ups already held when their client's receiver turned slow go back too, so that they do
  // not fill what the role holds and keep other clients' wake-ups unread.
  const deferring = setInterval(() => slots.deferParked(), DEFER_CHECK_MS);
  deferring.unref();
  // The callback sweep and the end of dead processes' claims (core's jobs/catalogue.ts).
  const jobs = startJobs(callbacksJobs(rt), rt.logger);
  return {
    async stop() {
      clearInterval(deferring);
      // No more callbacks claimed for this process; those already handed over finish or go back.
      rt.deliveries.postCallbacksHere(null);
      void jobs.stop();
      // Posts under way finish; held wake-ups that have not started go back to the queue.
      slots.close();
      await consumer.stop(rt.config.callbackTimeoutMs + 1000);
      // Ends the session (with the other claiming role's stop): claims still held are woken.
      await rt.session.stop(rt.reaper);
      await directory.close();
      await closeOutboundConnections();
    },
  };
}
