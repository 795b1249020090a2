import { classifyError } from '@ens/plugin-sdk';
import type { AttemptResult } from './store/deliveries.ts';

/*
 * ENS's retry policy, for provider sends and callback posts alike: whether a failed attempt is
 * tried again, after how long, when ENS gives up, and how long one attempt may take. The worker and
 * the callbacks role ask this module and decide nothing themselves; a change of policy is made
 * here.
 *
 * The schedules are the operator's: ENS_RETRY_BACKOFF for sends and ENS_CALLBACK_BACKOFF for
 * callbacks, declared with their defaults in config/variables.ts (every variable is declared there)
 * and passed in as lists of delays in milliseconds. What a provider's failure means is the plugin's
 * to say, through the SDK's error kinds (classifyError: transient, permanent, rate_limited, a
 * recipient refusal; the plugin's contract, so it stays in the SDK); what ENS does about it is
 * decided here.
 */

/**
 * The wait before the next attempt once attempt number `attempt` (counted from 1) has failed, read
 * from a back-off schedule in milliseconds: the nth delay follows the nth attempt, so a schedule of
 * n delays allows n + 1 attempts in all. Null when the schedule is spent and the caller must give
 * up.
 *
 * @example nextRetryDelay([1000, 10_000], 2) // 10_000: attempt 3 is the last
 * @example nextRetryDelay([1000, 10_000], 3) // null
 */
export function nextRetryDelay(schedule: readonly number[], attempt: number): number | null {
  return schedule[attempt - 1] ?? null;
}

/**
 * The next step of a delivery whose provider threw on attempt `attempt`, on the schedule
 * ENS_RETRY_BACKOFF: a permanent error fails it at once (a recipient refusal is carried along, for
 * the suppression list), a transient one is retried after the schedule's delay, a rate limit after
 * the provider's hint when it gave one; past the schedule it fails, saying it gave up. An error the
 * plugin did not classify is transient, never a silent permanent failure.
 *
 * @example decideSendRetry(transientError('503'), 1, [1000, 10_000], 'twilio') // { outcome: 'retry', delayMs: 1000, … }
 */
export function decideSendRetry(
  err: unknown,
  attempt: number,
  schedule: readonly number[],
  provider: string,
): AttemptResult {
  const { kind, message, retryAfterMs, recipientRefusal, recipientEventTypeOnly } =
    classifyError(err);
  if (kind === 'permanent') {
    return recipientRefusal
      ? {
          outcome: 'failed',
          provider,
          error: message,
          kind,
          recipientRefusal,
          recipientEventTypeOnly,
        }
      : { outcome: 'failed', provider, error: message, kind };
  }
  const scheduled = nextRetryDelay(schedule, attempt);
  if (scheduled === null) {
    return {
      outcome: 'failed',
      provider,
      error: `${message} (gave up after ${attempt} attempts)`,
      kind,
    };
  }
  const delayMs =
    kind === 'rate_limited' && retryAfterMs !== undefined ? Math.max(retryAfterMs, 0) : scheduled;
  return { outcome: 'retry', provider, error: message, delayMs, kind };
}

/**
 * The wait before a callback is posted again after attempt `attemptInRound` of its round (a replay
 * starts a new round), on the schedule ENS_CALLBACK_BACKOFF; null when it is done: delivered, or
 * for the dead letters (schedule spent). A callback that could not be signed goes to the dead
 * letters at once: retrying cannot help, and an operator replays it once the secret or the master
 * key is put right.
 */
export function decideCallbackRetry(
  post: { ok: boolean; signed: boolean },
  attemptInRound: number,
  schedule: readonly number[],
): number | null {
  return post.ok || !post.signed ? null : nextRetryDelay(schedule, attemptInRound);
}

/**
 * A provider call that has not answered within this share of the lease is treated as a transient
 * failure, so the lease always outlives the send and a slow send is never handed to a second
 * worker.
 */
const SEND_SHARE_OF_LEASE = 0.8;
const MAX_SEND_TIMEOUT_MS = 30_000;

/** How long one provider call may take, in ms, given the attempt's lease (ENS_LEASE). */
export function sendTimeoutMs(leaseMs: number): number {
  return Math.min(MAX_SEND_TIMEOUT_MS, leaseMs * SEND_SHARE_OF_LEASE);
}

/**
 * Time a callback's lease leaves for recording its post once the receiver has answered or timed
 * out.
 */
const CALLBACK_RECORD_MS = 5_000;

/**
 * The lease of one callback post, in ms: the receiver's time to answer (ENS_CALLBACK_TIMEOUT) and
 * the time to record the answer, and never shorter than a send's lease (ENS_LEASE).
 */
export function callbackLeaseMs(leaseMs: number, callbackTimeoutMs: number): number {
  return Math.max(leaseMs, callbackTimeoutMs + CALLBACK_RECORD_MS);
}
