import type { JsMsg } from '@nats-io/jetstream';
import { ACK_WAIT_MS } from './topology.ts';

/**
 * Keeps the messages a loop holds without working on them from being redelivered. A send loop
 * holds far more wake-ups than it has send slots (its fair window), and behind a slow or paced
 * provider one may wait longer than the consumer's ack wait; JetStream would then deliver it again
 * (harmless, but it fills the window with copies). Every message held longer than half the ack
 * wait is marked as in progress (`+WPI`), which restarts its ack wait.
 */
export class WaitingMessages {
  readonly #since = new Map<JsMsg, number>();
  readonly #timer: NodeJS.Timeout;

  constructor(private readonly ackWaitMs = ACK_WAIT_MS) {
    this.#timer = setInterval(() => this.#refresh(), ackWaitMs / 4);
    this.#timer.unref();
  }

  get size(): number {
    return this.#since.size;
  }

  /** Starts keeping `m`; call the returned function once work on it starts. */
  hold(m: JsMsg): () => void {
    this.#since.set(m, Date.now());
    return () => this.#since.delete(m);
  }

  #refresh(): void {
    const due = Date.now() - this.ackWaitMs / 2;
    for (const [m, since] of this.#since) {
      if (since > due) continue;
      m.working();
      this.#since.set(m, Date.now());
    }
  }

  close(): void {
    clearInterval(this.#timer);
    this.#since.clear();
  }
}
