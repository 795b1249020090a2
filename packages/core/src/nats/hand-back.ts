import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type { Logger } from 'pino';

/*
 * A stopping process gives back the messages it holds but has not started, so that another process
 * takes them within moments. A nak does not do that reliably: on the NATS server Debian ships
 * (2.9.10), a message nak'ed just after its process stopped pulling was now and then "redelivered"
 * to one of that process's expired-interest pulls, written to no connection, and counted as
 * delivered until the ack wait (60 s) ran out. test/nats/work-queue-stop.test.ts lost 1-3 of 1,000
 * that way in most runs, and a SIGTERM'd worker 5-19 of 35 in one run in four
 * (test/fault/worker-sigterm-handback.test.ts). A new message is only ever sent to a pull someone
 * listens on. So the message is published again, as a new one, and only once JetStream has stored
 * it is the original removed (term); a failure on the way falls back to the nak. A crash between
 * the two leaves a duplicate, which the delivery's row makes harmless, never a loss.
 */

/** Marks a message handed back by a stopping process: its new copy is a redelivery in all but name. */
export const HANDED_BACK_HEADER = 'Ens-Handed-Back';

export async function handBack(js: JetStreamClient, m: JsMsg, logger: Logger): Promise<void> {
  try {
    const h = headers();
    h.set(HANDED_BACK_HEADER, String(m.info.deliveryCount));
    await js.publish(m.subject, m.data, { headers: h });
    m.term();
  } catch (err) {
    logger.warn({ err, subject: m.subject }, 'could not hand a message back; nak instead');
    m.nak();
  }
}

/** Whether a message was handed back by a stopping process or delivered more than once. */
export function isRedelivered(m: JsMsg): boolean {
  return m.info.deliveryCount > 1 || m.headers?.has(HANDED_BACK_HEADER) === true;
}
