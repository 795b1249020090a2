import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { Logger } from 'pino';

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
): Promise<WorkQueueConsumer> {
  const consumer = await js.consumers.get(stream, durable);
  const messages = await consumer.consume({ max_messages: concurrency });
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  void (async () => {
    for await (const m of messages) {
      if (stopping) {
        m.nak();
        continue;
      }
      while (inFlight.size >= concurrency) await Promise.race(inFlight);
      const p = handle(m)
        .catch((err: unknown) => {
          logger.warn({ err, stream, durable }, 'work item failed; redelivering');
          m.nak(1000);
        })
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
  })().catch((err: unknown) => logger.error({ err, stream, durable }, 'consumer stopped'));
  return {
    async stop(timeoutMs) {
      stopping = true;
      messages.stop();
      await Promise.race([Promise.allSettled([...inFlight]), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    },
  };
}
