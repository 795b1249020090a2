import type { ConsumerMessages, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { registerLoop } from './loop-health.ts';

export interface WorkQueueConsumer {
  /** Stops taking messages and waits up to timeoutMs for handlers in flight. */
  stop(timeoutMs: number): Promise<void>;
}

export interface WorkQueueOptions {
  js: JetStreamClient;
  stream: string;
  durable: string;
  /** Messages handled at once. */
  concurrency: number;
  /**
   * Messages asked of the server per pull (default `concurrency`). Below `concurrency`, several
   * processes sharing the consumer each get a share of a backlog instead of the first one taking
   * all it may hold.
   */
  pullBatch?: number;
  /** Owns ack/nak; a message it throws on is nak'ed for redelivery after a second. */
  handle: (m: JsMsg) => Promise<void>;
  logger: Logger;
  /** Declares streams and consumers again; called before every re-attach. */
  redeclare: () => Promise<unknown>;
  /**
   * Registers a callback for NATS reconnects. A server that restarted may have lost the consumer,
   * and a pull on a vanished consumer only fails at the next missed heartbeat (30 s), so every
   * reconnect re-attaches at once.
   */
  onReconnect?: (listener: () => void) => void;
  /** How often the consumer's existence is checked on the server. Default 5 s. */
  watchEveryMs?: number;
}

/** Restart back-off: from half a second, doubling, to at most ten seconds between tries. */
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

/** Notifications after which the consumer will not deliver again until it is declared anew. */
const GONE = new Set(['consumer_deleted', 'consumer_not_found', 'stream_not_found']);

/**
 * Runs `handle` for each message of a durable JetStream consumer, at most `concurrency` at once,
 * under supervision: a loop whose iterator ends, throws, or whose consumer vanished from the
 * server (deleted, stream lost with a NATS store) declares the topology again and re-attaches with
 * back-off, logging at warn, for as long as the role runs. Its state is in the loop-health
 * registry (ens_consumer_up, /readyz). Never throws at start: NATS being away is waited out.
 */
export async function consumeWorkQueue(opts: WorkQueueOptions): Promise<WorkQueueConsumer> {
  const { js, stream, durable, concurrency, handle, logger, redeclare } = opts;
  const health = registerLoop(stream, durable);
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  let current: ConsumerMessages | null = null;
  let wakeRetry: (() => void) | null = null;

  // Waits on a freed place, not on Promise.race over every handler: a loop may hold tens of
  // thousands of messages (the send loops' fair window), and racing them all per message is quadratic.
  const placeFreed: (() => void)[] = [];
  const run = async (m: JsMsg) => {
    while (inFlight.size >= concurrency) await new Promise<void>((resolve) => placeFreed.push(resolve));
    const p = handle(m)
      .catch((err: unknown) => {
        logger.warn({ err, stream, durable }, 'work item failed; redelivering');
        m.nak(1000);
      })
      .finally(() => {
        inFlight.delete(p);
        placeFreed.shift()?.();
      });
    inFlight.add(p);
  };

  /** Ends the current attachment so the loop re-attaches (reconnect, vanished consumer). */
  const restart = (reason: string) => {
    if (stopping || !current) return;
    health.down(reason);
    current.stop();
  };
  opts.onReconnect?.(() => {
    restart('NATS reconnected');
    wakeRetry?.();
  });

  const attach = async (): Promise<ConsumerMessages> => {
    const consumer = await js.consumers.get(stream, durable);
    const messages = await consumer.consume({ max_messages: opts.pullBatch ?? concurrency, abort_on_missing_resource: true });
    void (async () => {
      for await (const s of messages.status()) {
        if (GONE.has(s.type)) restart(`the consumer is gone (${s.type})`);
      }
    })().catch(() => {});
    return messages;
  };

  // The library reports a vanished consumer only on its next pull or missed heartbeat; asking the
  // server now and then bounds how long a deleted consumer goes unnoticed.
  const watch = setInterval(() => {
    if (!current || stopping) return;
    const attached = current;
    js.consumers
      .get(stream, durable)
      .then((c) => c.info(false))
      .catch((err: unknown) => {
        if (current === attached && /not found/i.test(String((err as Error)?.message))) restart('the consumer is gone from the server');
      });
  }, opts.watchEveryMs ?? 5_000);
  watch.unref();

  let first = true;
  let firstAttempt!: () => void;
  const firstAttemptDone = new Promise<void>((r) => (firstAttempt = r));
  const loop = (async () => {
    let retryMs = FIRST_RETRY_MS;
    while (!stopping) {
      let reason: string;
      try {
        if (!first) await redeclare();
        current = await attach();
        health.up();
        if (!first) logger.warn({ stream, durable }, 'consume loop running again');
        first = false;
        firstAttempt();
        retryMs = FIRST_RETRY_MS;
        for await (const m of current) {
          if (stopping) {
            m.nak();
            continue;
          }
          await run(m);
        }
        reason = 'the consumer stopped delivering';
      } catch (err) {
        reason = (err as Error)?.message ?? String(err);
      }
      first = false;
      firstAttempt();
      if (stopping) break;
      health.down(reason);
      logger.warn({ stream, durable, reason, retryInMs: retryMs }, 'consume loop stopped; restarting');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, retryMs);
        wakeRetry = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wakeRetry = null;
      retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
    }
  })();
  // Start-up waits for the first attach to succeed or fail once, so a role that started is
  // consuming when NATS is there; when it is not, the loop keeps trying and /readyz says so.
  await firstAttemptDone;

  return {
    async stop(timeoutMs) {
      stopping = true;
      clearInterval(watch);
      current?.stop();
      wakeRetry?.();
      await Promise.race([Promise.allSettled([loop, ...inFlight]), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
      health.remove();
    },
  };
}
