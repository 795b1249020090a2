import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { EnsError } from '@ens/plugin-sdk';
import type { Logger } from 'pino';
import { ConfigError } from '../config/config-error.ts';
import { CHANNELS, type Channel } from '../schemas/channel.ts';
import { isNatsUnavailable } from './unavailable.ts';

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
export const sendSubject = (channel: Channel, lane: SendLane = 'next'): string =>
  lane === 'bulk' ? `ens.send.${channel}.bulk` : `ens.send.${channel}`;
export const sendConsumer = (channel: Channel, lane: SendLane = 'next'): string =>
  lane === 'bulk' ? `worker-${channel}-bulk` : `worker-${channel}`;
export const CALLBACK_SUBJECT = 'ens.callbacks.post';
export const CALLBACK_CONSUMER = 'callbacks';
/**
 * Core NATS subject (no persistence) that tells the feed role a change is waiting to be stamped.
 */
export const FEED_WAKE_SUBJECT = 'ens.feed.wake';

/** How long a worker may hold a message before JetStream hands it to another worker. */
export const ACK_WAIT_MS = 60_000;
/**
 * Wake-ups the send consumers let all worker processes hold at once: each holds up to
 * ENS_SEND_WINDOW per channel to schedule fairly, so this allows ten processes at the default
 * window.
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

/**
 * `url` may list several servers of a cluster, comma-separated; the client fails over between them.
 */
export async function connectNats(url: string, name: string): Promise<NatsConnection> {
  const servers = url
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return connect({ servers, name, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
}

const isNotFound = (err: unknown) => /not found/i.test(String((err as Error)?.message));

/*
 * A JetStream cluster answers while a majority of its servers are up, but places a new stream (or
 * raises one's copies) only on servers that are all up: with one node of three down, a stream of
 * three copies is refused ("no suitable peers for placement") though two nodes hold a majority,
 * and ENS never started until the third came back. So a stream that cannot have all its copies
 * starts with as many as a majority of them, and is raised in the background when the servers are
 * back (its consumers follow it). Fewer than a majority up, JetStream cannot answer at all; the
 * start waits, and says for what (JetStreamQuorumError).
 */
/**
 * The fewest copies of `replicas` that still are a majority of them: what a start may begin with.
 */
const majorityOf = (replicas: number) => Math.floor(replicas / 2) + 1;
const cannotPlace = (err: unknown) =>
  /no suitable peers|insufficient resources/i.test(String((err as Error)?.message));
/** How often a stream with fewer copies than ENS_NATS_REPLICAS is tried again. */
const RAISE_EVERY_MS = 5_000;

/** JetStream cannot hold ENS's streams yet: too few of its servers are up. Waited out at start. */
export class JetStreamQuorumError extends EnsError {
  static override readonly code: string = 'ENS_ERR_NATS_QUORUM';
}

/**
 * Says what a JetStream that does not answer or cannot place a stream waits for; other errors pass.
 */
function waitingFor(nc: NatsConnection, replicas: number, what: string, err: unknown): unknown {
  if (!cannotPlace(err) && !isNatsUnavailable(err)) return err;
  const info = nc.info;
  const up = info?.connect_urls?.length ?? 0;
  const cluster =
    replicas > 1
      ? ` In a cluster JetStream answers only while a majority of its servers are up and joined, and ENS_NATS_REPLICAS=${replicas} needs at least ${majorityOf(replicas)} JetStream servers up to start` +
        (info?.cluster
          ? ` (the server reached, ${info.server_name} of cluster ${info.cluster}, knows of ${up} up${up ? `: ${info.connect_urls!.join(', ')}` : ''}).`
          : '.') +
        ' Waiting for them.'
      : ' Waiting for it.';
  return new JetStreamQuorumError(
    `JetStream cannot ${what}: ${(err as Error)?.message ?? String(err)}.${cluster}`,
    { cause: err },
  );
}

/**
 * Adds a stream with `replicas` copies, or as few as a majority of them when servers are down;
 * resolves with the copies it got.
 */
async function addStream(
  jsm: JetStreamManager,
  name: string,
  subjects: string[],
  replicas: number,
): Promise<number> {
  for (let n = replicas; ; n--) {
    try {
      await jsm.streams.add({
        name,
        subjects,
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        num_replicas: n,
      });
      return n;
    } catch (err) {
      if (!cannotPlace(err) || n <= majorityOf(replicas)) throw err;
    }
  }
}

/** The streams of each connection still short of their copies. */
const short = new WeakMap<NatsConnection, Set<string>>();

/**
 * Tries every RAISE_EVERY_MS to give these streams `replicas` copies, until all have them or the
 * connection closes.
 */
function raiseLater(
  nc: NatsConnection,
  streams: string[],
  replicas: number,
  logger: Logger | undefined,
): void {
  logger?.warn(
    { streams, replicas },
    `JetStream streams have fewer than ENS_NATS_REPLICAS=${replicas} copies: a server is down; raising them when it is back`,
  );
  const left = short.get(nc);
  if (left) {
    for (const s of streams) left.add(s);
    return;
  }
  const waiting = new Set(streams);
  short.set(nc, waiting);
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void (async () => {
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      for (const name of waiting) {
        if (
          await jsm.streams.update(name, { num_replicas: replicas }).then(
            () => true,
            () => false,
          )
        ) {
          waiting.delete(name);
          logger?.info(
            { stream: name, replicas },
            'JetStream stream raised to ENS_NATS_REPLICAS copies',
          );
        }
      }
      if (waiting.size > 0) return;
      clearInterval(timer);
      short.delete(nc);
    })()
      .catch(() => {})
      .finally(() => (busy = false));
  }, RAISE_EVERY_MS);
  timer.unref();
  void nc.closed().then(() => clearInterval(timer));
}

/**
 * Declares streams and durable consumers; safe to call from every process at start-up. Streams get
 * `replicas` copies (ENS_NATS_REPLICAS: 3 on a three-node cluster survives the loss of a node), or
 * as few as a majority of them while servers are down (raised later, see above). A stream that
 * exists with other subjects or replicas is updated to ENS's; one with another retention or
 * storage cannot be, and stops the start with what to do. Throws JetStreamQuorumError while too
 * few servers are up.
 */
export async function ensureTopology(
  nc: NatsConnection,
  replicas = 1,
  logger?: Logger,
): Promise<JetStreamClient> {
  try {
    return await declare(nc, replicas, logger);
  } catch (err) {
    throw waitingFor(nc, replicas, "declare ENS's streams and consumers", err);
  }
}

async function declare(
  nc: NatsConnection,
  replicas: number,
  logger: Logger | undefined,
): Promise<JetStreamClient> {
  const jsm = await jetstreamManager(nc);
  const few: string[] = [];
  const streams: [string, string[]][] = [
    [SEND_STREAM, CHANNELS.flatMap((c) => SEND_LANES.map((l) => sendSubject(c, l)))],
    [CALLBACK_STREAM, [CALLBACK_SUBJECT]],
  ];
  for (const [name, subjects] of streams) {
    let existing: StreamConfig;
    try {
      existing = (await jsm.streams.info(name)).config;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      if ((await addStream(jsm, name, subjects, replicas)) < replicas) few.push(name);
      continue;
    }
    if (existing.retention !== RetentionPolicy.Workqueue || existing.storage !== StorageType.File) {
      throw new ConfigError(
        `JetStream stream ${name} exists with retention "${existing.retention}" and storage "${existing.storage}"; ENS needs a file-stored work queue. ` +
          `Delete the stream (nats stream rm ${name}: it holds only wake-ups, PostgreSQL keeps the work) and start again.`,
      );
    }
    const sameSubjects =
      existing.subjects.length === subjects.length &&
      subjects.every((s) => existing.subjects.includes(s));
    if (!sameSubjects || existing.num_replicas !== replicas) {
      try {
        await jsm.streams.update(name, { subjects, num_replicas: replicas });
      } catch (err) {
        // Servers down: the stream keeps the copies it has, if they are a majority, until raised.
        if (!cannotPlace(err) || existing.num_replicas < majorityOf(replicas)) throw err;
        if (!sameSubjects)
          await jsm.streams.update(name, { subjects, num_replicas: existing.num_replicas });
        few.push(name);
      }
    }
  }
  const consumers: [string, string, string][] = [
    ...CHANNELS.flatMap((c) =>
      SEND_LANES.map((l): [string, string, string] => [
        SEND_STREAM,
        sendConsumer(c, l),
        sendSubject(c, l),
      ]),
    ),
    [CALLBACK_STREAM, CALLBACK_CONSUMER, CALLBACK_SUBJECT],
  ];
  for (const [stream, durable, filter] of consumers) {
    const maxAckPending = stream === SEND_STREAM ? SEND_MAX_ACK_PENDING : CALLBACK_MAX_ACK_PENDING;
    let existing: ConsumerInfo;
    try {
      existing = await jsm.consumers.info(stream, durable);
    } catch (err) {
      if (!isNotFound(err)) throw err;
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
    if ((existing.config.max_ack_pending ?? 0) < maxAckPending)
      await jsm.consumers.update(stream, durable, { max_ack_pending: maxAckPending });
  }
  if (few.length > 0) raiseLater(nc, few, replicas, logger);
  return jetstream(nc);
}
