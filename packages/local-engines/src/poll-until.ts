import { setTimeout as sleep } from 'node:timers/promises';

export interface PollOptions {
  intervalMs: number;
  timeoutMs: number;
  /** Checked between attempts so a crashed engine fails fast instead of at the timeout. */
  abortIf?: () => Error | undefined;
}

/** Retries `attempt` until it returns a value other than undefined. */
export async function pollUntil<T>(
  attempt: () => Promise<T | undefined>,
  opts: PollOptions,
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    const aborted = opts.abortIf?.();
    if (aborted) throw aborted;
    const result = await attempt();
    if (result !== undefined) return result;
    if (Date.now() >= deadline) throw new Error(`timed out after ${opts.timeoutMs} ms`);
    await sleep(opts.intervalMs);
  }
}
