import t from 'tap';
import { permanentError, rateLimitedError, recipientError, transientError } from '@ens/plugin-sdk';
import {
  callbackLeaseMs,
  decideCallbackRetry,
  decideSendRetry,
  nextRetryDelay,
  sendTimeoutMs,
} from '@ens/core';

/**
 * The retry policy (packages/core/src/retry-policy.ts) decides for sends and callbacks alike: the
 * schedules, what a provider's error leads to, when ENS gives up, and how long an attempt may take.
 */

t.test('the nth delay follows the nth failed attempt', async (t) => {
  const schedule = [100, 2000, 60_000];
  t.equal(nextRetryDelay(schedule, 1), 100);
  t.equal(nextRetryDelay(schedule, 2), 2000);
  t.equal(nextRetryDelay(schedule, 3), 60_000, 'the last delay leads to the last attempt');
});

t.test('null once the schedule is spent: n delays allow n + 1 attempts', async (t) => {
  t.equal(nextRetryDelay([100, 2000, 60_000], 4), null);
  t.equal(nextRetryDelay([100, 2000, 60_000], 10), null);
  t.equal(nextRetryDelay([], 1), null, 'an empty schedule never retries');
});

t.test('a zero delay is a retry, not the end', async (t) => {
  t.equal(nextRetryDelay([0, 0], 2), 0);
});

t.test('an attempt number below 1 has no delay', async (t) => {
  t.equal(nextRetryDelay([100], 0), null);
});

t.test('a send: a provider error becomes the next step of the delivery', async (t) => {
  const schedule = [100, 2_000, 30_000];

  const permanent = decideSendRetry(permanentError('number is not mobile'), 1, schedule, 'acme');
  t.same(
    permanent,
    { outcome: 'failed', provider: 'acme', error: 'number is not mobile', kind: 'permanent' },
    'permanent → failed at once',
  );

  t.same(
    decideSendRetry(transientError('503'), 1, schedule, 'acme'),
    { outcome: 'retry', provider: 'acme', error: '503', delayMs: 100, kind: 'transient' },
    'transient on attempt 1 → the first delay',
  );
  t.match(
    decideSendRetry(transientError('503'), 2, schedule, 'acme'),
    { outcome: 'retry', delayMs: 2_000 },
    'transient on attempt 2 → the second delay',
  );
  t.match(
    decideSendRetry(transientError('503'), 3, schedule, 'acme'),
    { outcome: 'retry', delayMs: 30_000 },
    'transient on the last scheduled attempt → the last delay',
  );

  t.match(
    decideSendRetry(rateLimitedError('slow down', 7_500), 1, schedule, 'acme'),
    { outcome: 'retry', delayMs: 7_500, kind: 'rate_limited' },
    'rate_limited with a hint → retry after the hint',
  );
  t.match(
    decideSendRetry(rateLimitedError('slow down'), 2, schedule, 'acme'),
    { outcome: 'retry', delayMs: 2_000, kind: 'rate_limited' },
    'rate_limited without a hint → the schedule',
  );
  t.match(
    decideSendRetry(rateLimitedError('slow down', -5), 1, schedule, 'acme'),
    { outcome: 'retry', delayMs: 0 },
    'a hint in the past → at once',
  );

  const gaveUp = decideSendRetry(transientError('503'), 4, schedule, 'acme');
  t.equal(gaveUp.outcome, 'failed', 'past the schedule → failed');
  t.match(
    gaveUp,
    { kind: 'transient', error: /^503 \(gave up after 4 attempts\)$/ },
    'the error says it gave up',
  );
  t.match(
    decideSendRetry(rateLimitedError('slow down', 100), 4, schedule, 'acme'),
    { outcome: 'failed', error: /gave up/ },
    'rate limits also run out',
  );

  t.match(
    decideSendRetry(new Error('socket hang up'), 1, schedule, 'acme'),
    { outcome: 'retry', kind: 'transient', error: 'socket hang up' },
    'an unclassified throw is transient, never a silent permanent failure',
  );
  t.match(
    decideSendRetry('boom', 1, schedule, 'acme'),
    { outcome: 'retry', error: 'boom' },
    'a thrown non-Error is transient too',
  );
});

t.test(
  'a send: a refusal about the recipient fails at once and is carried for the suppression list',
  async (t) => {
    t.same(decideSendRetry(recipientError('no such mailbox', 'hard_bounce'), 1, [100], 'smtp'), {
      outcome: 'failed',
      provider: 'smtp',
      error: 'no such mailbox',
      kind: 'permanent',
      recipientRefusal: 'hard_bounce',
      recipientEventTypeOnly: false,
    });
  },
);

t.test(
  'a callback: retried on its schedule until spent, never when delivered or unsigned',
  async (t) => {
    const schedule = [1_000, 10_000];
    t.equal(
      decideCallbackRetry({ ok: false, signed: true }, 1, schedule),
      1_000,
      'a failed post → the first delay',
    );
    t.equal(decideCallbackRetry({ ok: false, signed: true }, 2, schedule), 10_000);
    t.equal(
      decideCallbackRetry({ ok: false, signed: true }, 3, schedule),
      null,
      'schedule spent → the dead letters',
    );
    t.equal(decideCallbackRetry({ ok: true, signed: true }, 1, schedule), null, 'delivered → done');
    t.equal(
      decideCallbackRetry({ ok: false, signed: false }, 1, schedule),
      null,
      'a callback that cannot be signed goes to the dead letters at once',
    );
  },
);

t.test(
  "an attempt's time: a send answers within its lease, a callback's lease covers its post",
  async (t) => {
    t.equal(sendTimeoutMs(10_000), 8_000, 'four fifths of the lease');
    t.equal(sendTimeoutMs(120_000), 30_000, 'at most 30 s');
    t.equal(callbackLeaseMs(30_000, 10_000), 30_000, 'never shorter than a send lease');
    t.equal(
      callbackLeaseMs(30_000, 60_000),
      65_000,
      "the receiver's time and 5 s to record its answer",
    );
  },
);
