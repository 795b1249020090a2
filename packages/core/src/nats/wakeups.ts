import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Channel } from '../schemas/channel.ts';
import { CheckedPublisher } from './checked-publisher.ts';
import {
  CALLBACK_STREAM,
  CALLBACK_SUBJECT,
  FEED_WAKE_SUBJECT,
  SEND_STREAM,
  sendSubject,
} from './topology.ts';

/*
 * Wake-ups are plain NATS publishes on the streams' subjects: no per-message acknowledgement is
 * awaited, so an accept never waits for JetStream. They are checked in windows behind the caller's
 * back and published again when their stream lost them in an election (checked-publisher.ts). A
 * wake-up only points at a row in PostgreSQL, and the sweepers re-send any that are still lost
 * (server down, store lost): the check only makes an election cost seconds, not the sweep grace.
 */
const publishers = new WeakMap<NatsConnection, Map<string, CheckedPublisher>>();

function publisherFor(nc: NatsConnection, stream: string, logger: Logger): CheckedPublisher {
  let byStream = publishers.get(nc);
  if (!byStream) {
    byStream = new Map();
    publishers.set(nc, byStream);
  }
  let p = byStream.get(stream);
  if (!p) {
    p = new CheckedPublisher(nc, stream, logger);
    byStream.set(stream, p);
  }
  return p;
}

function publishAll(
  nc: NatsConnection,
  stream: string,
  subject: (i: number) => string,
  ids: string[],
  logger: Logger,
): number {
  let sent = 0;
  try {
    const publisher = publisherFor(nc, stream, logger);
    for (let i = 0; i < ids.length; i++) {
      publisher.publish(subject(i), ids[i]!);
      sent++;
    }
  } catch (err) {
    logger.warn(
      { err, unsent: ids.length - sent },
      'wake-ups not published; the sweeper will re-enqueue them',
    );
  }
  return sent;
}

/**
 * Where a store publishes the next stage's wake-ups after its own commits (the Runtime's NATS
 * connection and logger). A store made without one (a test, a tool without NATS) publishes
 * nothing; the sweepers and the feed's poll then pick the work up.
 */
export interface WakeupTarget {
  nc: NatsConnection;
  logger: Logger;
}

/** What a send wake-up names: the delivery, and the flow the worker schedules it in. */
export interface SendWakeup {
  id: string;
  channel: Channel;
  clientId: string;
  tenant: string;
  eventType: string;
}

/*
 * A send wake-up's payload is `<delivery id> <client id> <tenant> <event type>`: the worker holds
 * many wake-ups per send slot and picks the next one fairly across clients and tenants (see
 * scheduling/fair-queue.ts) before it reads any row, so the flow travels with the wake-up. Client
 * ids, tenant ids and delivery ids hold no space; the event type, which may, comes last.
 */
const sendPayload = (d: SendWakeup) => `${d.id} ${d.clientId} ${d.tenant} ${d.eventType}`;

/**
 * Reads a send wake-up's payload; a bare delivery id (as published before flows) has an empty flow.
 */
export function parseSendWakeup(text: string): Omit<SendWakeup, 'channel'> {
  const a = text.indexOf(' ');
  if (a < 0) return { id: text, clientId: '', tenant: '', eventType: '' };
  const b = text.indexOf(' ', a + 1);
  const c = b < 0 ? -1 : text.indexOf(' ', b + 1);
  return {
    id: text.slice(0, a),
    clientId: text.slice(a + 1, b < 0 ? undefined : b),
    tenant: b < 0 ? '' : text.slice(b + 1, c < 0 ? undefined : c),
    eventType: c < 0 ? '' : text.slice(c + 1),
  };
}

/**
 * Wake-ups published together beyond this many go to the bulk lane (see topology.ts): a message to
 * a person on a few channels stays in the lane that is read at once, a fan-out does not.
 */
export const BULK_WAKEUPS = 10;

/** Wakes the channel workers for these deliveries, a large set on the bulk lane. Never throws. */
export function wakeSenders(
  nc: NatsConnection,
  items: readonly SendWakeup[],
  logger: Logger,
): number {
  const lane = items.length > BULK_WAKEUPS ? 'bulk' : 'next';
  return publishAll(
    nc,
    SEND_STREAM,
    (i) => sendSubject(items[i]!.channel, lane),
    items.map(sendPayload),
    logger,
  );
}

/** What a callback wake-up names: the callback, and the client whose turn it takes. */
export interface CallbackWakeup {
  id: string;
  clientId: string;
}

/*
 * A callback wake-up's payload is `<callback id> <client id>`: the callbacks role shares its post
 * slots among clients before it reads any row (see services/callbacks/src/post-slots.ts), so the
 * client travels with the wake-up, as a send wake-up's flow does.
 */
const callbackPayload = (c: CallbackWakeup) => `${c.id} ${c.clientId}`;

/** Reads a callback wake-up's payload; a bare callback id (as published before) has no client. */
export function parseCallbackWakeup(text: string): CallbackWakeup {
  const a = text.indexOf(' ');
  return a < 0 ? { id: text, clientId: '' } : { id: text.slice(0, a), clientId: text.slice(a + 1) };
}

/** Wakes the callbacks role for these callbacks. Never throws. */
export function wakeCallbacks(
  nc: NatsConnection,
  items: readonly CallbackWakeup[],
  logger: Logger,
): number {
  return publishAll(
    nc,
    CALLBACK_STREAM,
    () => CALLBACK_SUBJECT,
    items.map(callbackPayload),
    logger,
  );
}

const feedWakeQueued = new WeakSet<NatsConnection>();

/**
 * Tells the feed role that changes wait to be stamped. Never throws, and publishes at most once per
 * connection per turn of the event loop: accepts and outcomes are committed in batches whose
 * callers resume in separate callbacks, and one wake-up covers them all (the feed debounces
 * anyway). Lossy by design: the feed also polls, so a wake-up lost to a closed connection only
 * delays a change.
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
