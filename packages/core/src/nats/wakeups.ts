import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Channel } from '../schemas/channel.ts';
import { CALLBACK_SUBJECT, FEED_WAKE_SUBJECT, sendSubject } from './topology.ts';

/*
 * Wake-ups are plain NATS publishes on the streams' subjects: JetStream stores them all the same,
 * but no per-message acknowledgement is awaited. That is safe by design: a wake-up only points at
 * a row in PostgreSQL, and the sweepers re-send any that are lost (server down, store lost). A
 * publish with acknowledgement cost a request/reply and an error object per message.
 */
function publishAll(nc: NatsConnection, subject: (i: number) => string, ids: string[], logger: Logger): number {
  let sent = 0;
  try {
    for (let i = 0; i < ids.length; i++) {
      nc.publish(subject(i), ids[i]!);
      sent++;
    }
  } catch (err) {
    logger.warn({ err, unsent: ids.length - sent }, 'wake-ups not published; the sweeper will re-enqueue them');
  }
  return sent;
}

/** Wakes the channel workers for these deliveries. Never throws. */
export function wakeSenders(nc: NatsConnection, items: { id: string; channel: Channel }[], logger: Logger): number {
  return publishAll(nc, (i) => sendSubject(items[i]!.channel), items.map((d) => d.id), logger);
}

/** Wakes the callbacks role for these callback ids. Never throws. */
export function wakeCallbacks(nc: NatsConnection, ids: string[], logger: Logger): number {
  return publishAll(nc, () => CALLBACK_SUBJECT, ids, logger);
}

const feedWakeQueued = new WeakSet<NatsConnection>();

/**
 * Tells the feed role that changes wait to be stamped. Never throws, and publishes at most once per
 * connection per turn of the event loop: accepts and outcomes are committed in batches whose callers
 * resume in separate callbacks, and one wake-up covers them all (the feed debounces anyway). Lossy
 * by design: the feed also polls, so a wake-up lost to a closed connection only delays a change.
 */
export function wakeFeed(nc: NatsConnection): void {
  if (feedWakeQueued.has(nc)) return;
  feedWakeQueued.add(nc);
  setImmediate(() => {
    feedWakeQueued.delete(nc);
    try {
      nc.publish(FEED_WAKE_SUBJECT);
    } catch {
      // closed or reconnecting: the feed's poll picks the change up
    }
  });
}
