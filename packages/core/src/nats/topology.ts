import { connect, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient } from '@nats-io/jetstream';
import { CHANNELS, type Channel } from '../schemas/channel.ts';

/**
 * JetStream names, declared here only. Messages are wake-ups that carry an id; the state they
 * point at lives in PostgreSQL, so a lost message costs latency (the sweeper re-sends), not data.
 */
export const SEND_STREAM = 'ENS_SEND';
export const CALLBACK_STREAM = 'ENS_CALLBACKS';
export const sendSubject = (channel: Channel): string => `ens.send.${channel}`;
export const sendConsumer = (channel: Channel): string => `worker-${channel}`;
export const CALLBACK_SUBJECT = 'ens.callbacks.post';
export const CALLBACK_CONSUMER = 'callbacks';
/** Core NATS subject (no persistence) that tells the feed role a change is waiting to be stamped. */
export const FEED_WAKE_SUBJECT = 'ens.feed.wake';

/** How long a worker may hold a message before JetStream hands it to another worker. */
export const ACK_WAIT_MS = 60_000;

export async function connectNats(url: string, name: string): Promise<NatsConnection> {
  return connect({ servers: url, name, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
}

/** Declares streams and durable consumers; safe to call from every process at start-up. */
export async function ensureTopology(nc: NatsConnection): Promise<JetStreamClient> {
  const jsm = await jetstreamManager(nc);
  const streams: [string, string[]][] = [
    [SEND_STREAM, CHANNELS.map(sendSubject)],
    [CALLBACK_STREAM, [CALLBACK_SUBJECT]],
  ];
  for (const [name, subjects] of streams) {
    try {
      await jsm.streams.info(name);
    } catch {
      await jsm.streams.add({ name, subjects, retention: RetentionPolicy.Workqueue, storage: StorageType.File });
    }
  }
  const consumers: [string, string, string][] = [
    ...CHANNELS.map((c): [string, string, string] => [SEND_STREAM, sendConsumer(c), sendSubject(c)]),
    [CALLBACK_STREAM, CALLBACK_CONSUMER, CALLBACK_SUBJECT],
  ];
  for (const [stream, durable, filter] of consumers) {
    try {
      await jsm.consumers.info(stream, durable);
    } catch {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        filter_subject: filter,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: ACK_WAIT_MS * 1_000_000,
        max_deliver: -1,
        max_ack_pending: 10_000,
      });
    }
  }
  return jetstream(nc);
}
