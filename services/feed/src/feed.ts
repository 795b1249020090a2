import type { Runtime } from '@ens/core';
import { FEED_WAKE_SUBJECT, feedStamped, registerLoop, stampBatch } from '@ens/core/internal';

const BATCH = 5000;
/** Upper bound on how long a change waits to appear in the feed when no wake-up arrives. */
const IDLE_POLL_MS = 200;
const WAKE_DEBOUNCE_MS = 50;
/**
 * New deliveries younger than this are left to their outcome, which stamps them itself
 * (store/feed.ts, STAMP_SQL): a delivery is stamped once instead of twice while the workers keep
 * up with a backlog of up to this age. Reads of the feed stamp their client's rows themselves, so
 * they do not wait; only a row no worker has finished (workers down, a send scheduled later)
 * waits this long for the feed role.
 */
const FRESH_MS = 60_000;

export interface FeedRole {
  stop(): Promise<void>;
}

/**
 * Runs the feed role: stamps changes as soon as a worker or the API signals one (core NATS
 * wake-ups, lossy by design) and at least every IDLE_POLL_MS regardless.
 */
export async function startFeed(rt: Runtime): Promise<FeedRole> {
  let stopped = false;
  let wake: (() => void) | null = null;
  const sub = rt.nc.subscribe(FEED_WAKE_SUBJECT, { callback: () => wake?.() });
  // The stamper polls PostgreSQL whatever NATS does; it is down while its stamping fails.
  const health = registerLoop('feed', 'stamper');
  const done = (async () => {
    while (!stopped) {
      let n = 0;
      try {
        n = await stampBatch(rt.keyed, BATCH, FRESH_MS);
        if (n > 0) feedStamped.inc(n);
        health.up();
      } catch (err) {
        health.down((err as Error).message);
        rt.logger.warn({ err }, 'feed stamping failed; will try again');
      }
      if (n === BATCH || stopped) continue;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, IDLE_POLL_MS);
        wake = () => {
          clearTimeout(t);
          wake = null;
          // A short pause lets a burst of changes land in one batch, and lets a delivery accepted
          // and sent within it be stamped once instead of twice.
          setTimeout(resolve, WAKE_DEBOUNCE_MS);
        };
      });
      wake = null;
    }
  })();
  return {
    async stop() {
      stopped = true;
      sub.unsubscribe();
      wake?.();
      await done;
      health.remove();
    },
  };
}
