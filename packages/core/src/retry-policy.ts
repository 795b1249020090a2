/**
 * The wait before the next attempt once attempt number `attempt` (counted from 1) has failed, read
 * from a back-off schedule in milliseconds (ENS_RETRY_BACKOFF for sends, ENS_CALLBACK_BACKOFF for
 * callbacks): the nth delay follows the nth attempt, so a schedule of n delays allows n + 1
 * attempts in all. Null when the schedule is spent and the caller must give up.
 *
 * @example nextRetryDelay([1000, 10_000], 2) // 10_000: attempt 3 is the last
 * @example nextRetryDelay([1000, 10_000], 3) // null
 */
export function nextRetryDelay(schedule: readonly number[], attempt: number): number | null {
  return schedule[attempt - 1] ?? null;
}
