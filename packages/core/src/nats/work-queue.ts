import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { SlotsClosedError, type Slots } from '../slots.ts';

export interface WorkQueueConsumer {
  /** Stops taking messages and waits up to timeoutMs for handlers in flight. */
  stop(timeoutMs: number): Promise<void>;
}

/**
 * Runs `handle` for each message of a durable JetStream consumer, at most `concurrency` at once.
 * The handler owns ack/nak; a message it throws on is nak'ed for redelivery after a second.
 */
export async function consumeWorkQueue(
  js: JetStreamClient,
  stream: string,
  durable: string,
  concurrency: number,
  handle: (m: JsMsg) => Promise<void>,
  logger: Logger,
  /** Re-declares streams and consumers; called before re-attaching after the consumer vanished. */
  redeclare: () => Promise<unknown> = async () => {},
  /**
   * Registers a callback for NATS reconnects. A server that restarted may have lost the consumer,
   * and a pull on a vanished consumer only fails at the next missed heartbeat (30 s), so every
   * reconnect re-attaches at once.
   */
  onReconnect: (listener: () => void) => void = () => {},
): Promise<WorkQueueConsumer> {
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  let current: { stop(): void } | null = null;
  const run = async (m: JsMsg) => {
    while (inFlight.size >= concurrency) await Promise.race(inFlight);
    const p = handle(m)
      .catch((err: unknown) => {
        logger.warn({ err, stream, durable }, 'work item failed; redelivering');
        m.nak(1000);
      })
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  };
  // The first attach must succeed (a bad topology should stop start-up); later ones retry forever,
  // because a NATS restart that lost its store deletes the consumer under us.
  const attach = async () => {
    const consumer = await js.consumers.get(stream, durable);
    const messages = await consumer.consume({ max_messages: concurrency });
    current = messages;
    return messages;
  };
  let messages = await attach();
  onReconnect(() => current?.stop());
  void (async () => {
    while (!stopping) {
      try {
        for await (const m of messages) {
          if (stopping) {
            m.nak();
            continue;
          }
          await run(m);
        }
      } catch (err) {
        if (!stopping) logger.warn({ err, stream, durable }, 'consumer interrupted; re-attaching');
      }
      while (!stopping) {
        await new Promise((r) => setTimeout(r, 1000));
        try {
          await redeclare();
          messages = await attach();
          break;
        } catch (err) {
          logger.warn({ err, stream, durable }, 'cannot attach to consumer yet');
        }
      }
    }
  })();
  return {
    async stop(timeoutMs) {
      stopping = true;
      current?.stop();
      await Promise.race([Promise.allSettled([...inFlight]), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    },
  };
}

/**
 * Runs fn in one of the role's slots. When the role is stopping (slots closed) the wake-up was
 * never claimed, so it goes straight back to the queue for another process, and this returns
 * undefined.
 */
export async function runInSlotOrRequeue<T>(slots: Slots, m: JsMsg, fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await slots.run(fn);
  } catch (err) {
    if (err instanceof SlotsClosedError) {
      m.nak();
      return undefined;
    }
    throw err;
  }
}
