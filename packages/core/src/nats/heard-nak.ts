import type { JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { ACK_WAIT_MS } from './topology.ts';

/*
 * A nak is a plain publish to the consumer's ack subject, which only the consumer's JetStream
 * leader listens on. While the consumer elects a leader (a step-down in a rolling upgrade, a node
 * lost) nobody listens, and the nak is dropped without a word: the message stays pending on the new
 * leader as delivered, and comes back only after the ack wait (60 s). A retry nak'ed with its
 * back-off in that window waited for the sweeper (ENS_SWEEP_GRACE, 30 s) instead; the soak saw 74
 * such retries in two rounds of step-downs. A nak the new leader has already taken keeps its delay
 * (the leader replicates it), so only the unheard ones are at stake.
 *
 * So a nak asks for JetStream's reply, and one that gets none (no responders: no leader) is sent
 * again, with what remains of its delay, until a leader hears it. Acks stay plain publishes: one
 * lost costs a redelivery after the ack wait, which the claim turns into an ack.
 */

/** Pause before sending an unheard nak again; doubles up to the last. */
const RETRY_MS = [250, 500, 1_000, 2_000];
/** How long one nak waits for JetStream's reply. */
const REPLY_TIMEOUT_MS = 2_000;
/**
 * After this, the ack wait's redelivery comes as soon as another nak would, and the sweeper is
 * there for what it misses.
 */
const GIVE_UP_MS = ACK_WAIT_MS / 2;

const encoder = new TextEncoder();

/**
 * Makes `m.nak` ask JetStream for a reply and send again until the consumer's leader hears it (see
 * above). The first nak counts; later ones are ignored, as the library ignores them. The success
 * path (`ack`) is untouched and costs nothing more.
 */
export function confirmNaks(m: JsMsg, nc: NatsConnection, logger: Logger): void {
  // The ack subject: the library's message has it, its interface does not name it.
  const reply = 'reply' in m && typeof m.reply === 'string' ? m.reply : '';
  if (!reply) return;
  let nakd = false;
  m.nak = (millis?: number) => {
    if (nakd) return;
    nakd = true;
    void nakUntilHeard(nc, reply, millis ?? 0, logger);
  };
}

async function nakUntilHeard(
  nc: NatsConnection,
  reply: string,
  delayMs: number,
  logger: Logger,
): Promise<void> {
  const started = Date.now();
  const dueAt = started + delayMs;
  for (let tries = 0; ; tries++) {
    const remaining = Math.max(0, dueAt - Date.now());
    const payload =
      remaining > 0 ? `-NAK ${JSON.stringify({ delay: remaining * 1_000_000 })}` : '-NAK';
    try {
      await nc.request(reply, encoder.encode(payload), { timeout: REPLY_TIMEOUT_MS });
      if (tries > 0) logger.debug({ tries }, 'nak heard by the consumer after a leader change');
      return;
    } catch (err) {
      if (nc.isClosed() || nc.isDraining()) return;
      if (Date.now() - started > GIVE_UP_MS) {
        logger.warn(
          { err, tries },
          'no JetStream leader heard a nak; the message comes back after the ack wait',
        );
        return;
      }
    }
    const pause = RETRY_MS[Math.min(tries, RETRY_MS.length - 1)]!;
    await new Promise((r) => setTimeout(r, pause).unref());
  }
}
