import { connect, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient } from '@nats-io/jetstream';
import { ConfigError } from '../config/config-error.ts';
import { CHANNELS, type Channel } from '../schemas/channel.ts';

/**
 * JetStream names, declared here only. Messages are wake-ups that carry an id; the state they
 * point at lives in PostgreSQL, so a lost message costs latency (the sweeper re-sends), not data.
 */
export const SEND_STREAM = 'ENS_SEND';
export const CALLBACK_STREAM = 'ENS_CALLBACKS';
/**
 * Each channel's work queue has two lanes. A wake-up waits behind every wake-up published before
 * it on its subject until a worker has read them into its fair window, and one handoff can publish
 * tens of thousands at once; a one-recipient message of another client published just after would
 * wait for all of them to be read. So wake-ups published in large sets (big handoffs, the
 * sweeper's catch-ups) go to the bulk lane, and the worker reads both lanes into one window.
 */
export type SendLane = 'next' | 'bulk';
export const SEND_LANES: readonly SendLane[] = ['next', 'bulk'];
export const sendSubject = (channel: Channel, lane: SendLane = 'next'): string => (lane === 'bulk' ? `ens.send.${channel}.bulk` : `ens.send.${channel}`);
export const sendConsumer = (channel: Channel, lane: SendLane = 'next'): string => (lane === 'bulk' ? `worker-${channel}-bulk` : `worker-${channel}`);
export const CALLBACK_SUBJECT = 'ens.callbacks.post';
export const CALLBACK_CONSUMER = 'callbacks';
/** Core NATS subject (no persistence) that tells the feed role a change is waiting to be stamped. */
export const FEED_WAKE_SUBJECT = 'ens.feed.wake';

/** How long a worker may hold a message before JetStream hands it to another worker. */
export const ACK_WAIT_MS = 60_000;
/**
 * Wake-ups the send consumers let all worker processes hold at once: each holds up to
 * ENS_SEND_WINDOW per channel to schedule fairly, so this allows ten processes at the default window.
 */
const SEND_MAX_ACK_PENDING = 1_000_000;
/**
 * The same for the callbacks consumer. JetStream counts a wake-up put back for later (a retry on
 * ENS_CALLBACK_BACKOFF, a post deferred behind a slow receiver) as unacknowledged until it is due,
 * and hands out nothing more once this many are: at 10,000, one client whose receiver refused
 * 10,000 callbacks stopped every other client's callbacks until its retries came round (up to an
 * hour). Processes hold at most 1,024 each; the rest of the allowance is for those waiting.
 */
const CALLBACK_MAX_ACK_PENDING = 1_000_000;

/** `url` may list several servers of a cluster, comma-separated; the client fails over between them. */
export async function connectNats(url: string, name: string): Promise<NatsConnection> {
  const servers = url.split(',').map((s) => s.trim()).filter(Boolean);
  return connect({ servers, name, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
}

const isNotFound = (err: unknown) => /not found/i.test(String((err as Error)?.message));

/**
 * Declares streams and durable consumers; safe to call from every process at start-up. Streams get
 * `replicas` copies (ENS_NATS_REPLICAS: 3 on a three-node cluster survives the loss of a node). A
 * stream that exists with other subjects or replicas is updated to ENS's; one with another
 * retention or storage cannot be, and stops the start with what to do.
 */
export async function ensureTopology(nc: NatsConnection, replicas = 1): Promise<JetStreamClient> {
  const jsm = await jetstreamManager(nc);
  const streams: [string, string[]][] = [
    [SEND_STREAM, CHANNELS.flatMap((c) => SEND_LANES.map((l) => sendSubject(c, l)))],
    [CALLBACK_STREAM, [CALLBACK_SUBJECT]],
  ];
  for (const [name, subjects] of streams) {
    let existing;
    try {
      existing = (await jsm.streams.info(name)).config;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await jsm.streams.add({ name, subjects, retention: RetentionPolicy.Workqueue, storage: StorageType.File, num_replicas: replicas });
      continue;
    }
    if (existing.retention !== RetentionPolicy.Workqueue || existing.storage !== StorageType.File) {
      throw new ConfigError(
        `JetStream stream ${name} exists with retention "${existing.retention}" and storage "${existing.storage}"; ENS needs a file-stored work queue. ` +
          `Delete the stream (nats stream rm ${name}: it holds only wake-ups, PostgreSQL keeps the work) and start again.`,
      );
    }
    const sameSubjects = existing.subjects.length === subjects.length && subjects.every((s) => existing.subjects.includes(s));
    if (!sameSubjects || existing.num_replicas !== replicas) {
      await jsm.streams.update(name, { subjects, num_replicas: replicas });
    }
  }
  const consumers: [string, string, string][] = [
    ...CHANNELS.flatMap((c) => SEND_LANES.map((l): [string, string, string] => [SEND_STREAM, sendConsumer(c, l), sendSubject(c, l)])),
    [CALLBACK_STREAM, CALLBACK_CONSUMER, CALLBACK_SUBJECT],
  ];
  for (const [stream, durable, filter] of consumers) {
    const maxAckPending = stream === SEND_STREAM ? SEND_MAX_ACK_PENDING : CALLBACK_MAX_ACK_PENDING;
    let existing;
    try {
      existing = await jsm.consumers.info(stream, durable);
    } catch {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        filter_subject: filter,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: ACK_WAIT_MS * 1_000_000,
        max_deliver: -1,
        max_ack_pending: maxAckPending,
      });
      continue;
    }
    // Consumers made before allowed 10,000 held wake-ups across all processes.
    if ((existing.config.max_ack_pending ?? 0) < maxAckPending) await jsm.consumers.update(stream, durable, { max_ack_pending: maxAckPending });
  }
  return jetstream(nc);
}
