import t from 'tap';
import { nextRetryDelay } from '@ens/core';

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
