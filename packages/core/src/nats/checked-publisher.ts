import { createInbox, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import { metricsRegistry } from '../metrics.ts';

/*
 * A wake-up published while its stream has no leader (an election after a node was lost, or a
 * step-down) is stored by nobody, and was found again only by the sweeper, 30 s later
 * (ENS_SWEEP_GRACE). Confirming every wake-up (a reply subject and JetStream's acknowledgement)
 * fixes that but was measured at 8.5 µs of client and 10 µs of nats-server CPU per wake-up against
 * 2.4 and 3.9 µs plain: 4-8 % of the pipeline's CPU per delivery, spent for elections that happen
 * in a rolling upgrade. So wake-ups go out plain, as before, and are checked in windows:
 *
 * - Each publisher keeps what it published since its last checkpoint, and at most every MARK_MS one
 *   wake-up goes out with a reply subject (the marker). A connection's messages reach the stream
 *   in order, so a stored marker proves every wake-up before it was stored, by that leader.
 * - A marker refused (no responders: the stream has no leader) or not answered within
 *   ANSWER_WITHIN_MS starts trouble: one held wake-up per tick is published again as a probe, and
 *   when a probe is stored every held wake-up is published again.
 * - A leader that moves in milliseconds (a step-down) may lose the wake-ups of those milliseconds
 *   between two markers that are both stored. JetStream's LEADER_ELECTED advisory for the stream
 *   (or a reconnect of this connection) publishes again everything held, and a wake-up is held at
 *   least HOLD_MS after a marker confirmed it, so the advisory finds the ones the election may
 *   have cost.
 *
 * Publishing a wake-up twice is harmless: it only points at a row, and a worker that finds the row
 * taken or ended drops it. What is still lost (held past GIVE_UP_MS, or beyond MAX_HELD) is the
 * sweeper's, as before.
 */

export const wakeupsRepublished = new Counter({
  name: 'ens_wakeups_republished_total',
  help:
    'Wake-ups published again because their stream refused or did not confirm a marker (no ' +
    'leader during an election), or elected a leader',
  labelNames: ['stream'],
  registers: [metricsRegistry],
});

export const wakeupsAbandoned = new Counter({
  name: 'ens_wakeups_abandoned_total',
  help:
    'Wake-ups left to the sweeper (ENS_SWEEP_GRACE): their stream did not take them within 30 s, ' +
    'or too many waited',
  labelNames: ['stream'],
  registers: [metricsRegistry],
});

/** At most one marker per this long; also how often trouble is probed. */
const MARK_MS = 100;
/** A marker not answered within this counts as refused. */
const ANSWER_WITHIN_MS = 3_000;
/** How long a confirmed wake-up is still held, for a leader-elected advisory that comes late. */
const HOLD_MS = 1_000;
/**
 * A tail of wake-ups no marker covered is confirmed once it is this old (a copy of its last one is
 * the marker).
 */
const TAIL_MS = 300;
/** A held wake-up older than this is given up to the sweeper. */
const GIVE_UP_MS = 30_000;
/** Wake-ups held at most; beyond, new ones go out unchecked. */
const MAX_HELD = 200_000;

interface Held {
  subject: string;
  payload: string;
  /** When it was first published: GIVE_UP_MS counts from here. */
  firstAt: number;
  /** When it was last published: HOLD_MS and TAIL_MS count from here. */
  at: number;
}

/**
 * A stored message's acknowledgement is `{"stream":…}`; a refusal is an empty 503 status or
 * `{"error":…}`.
 */
const STORED = Buffer.from('{"stream"');
const isStored = (data: Uint8Array) =>
  data.length > STORED.length && Buffer.compare(STORED, data.subarray(0, STORED.length)) === 0;

/** Publishes the wake-ups of one stream on one connection, checked in windows (see above). */
export class CheckedPublisher {
  readonly #nc: NatsConnection;
  readonly #stream: string;
  readonly #logger: Logger;
  readonly #inbox = createInbox();
  readonly #timer: NodeJS.Timeout;
  /** What was published and not yet released, oldest first, from #head on. */
  #held: Held[] = [];
  #head = 0;
  /** Count of wake-ups ever held (#held[i] is number #base + i). */
  #base = 0;
  /** Wake-ups numbered below this were confirmed stored. */
  #confirmed = 0;
  /** The marker awaiting its answer: the number after the wake-up it confirms, and when it left. */
  #marker: { token: string; upTo: number; at: number } | null = null;
  #lastMarkAt = 0;
  #seq = 0;
  /** The stream refused or did not answer: probing until it takes a wake-up again. */
  #trouble = false;
  #connected = true;

  constructor(nc: NatsConnection, stream: string, logger: Logger) {
    this.#nc = nc;
    this.#stream = stream;
    this.#logger = logger;
    nc.subscribe(`${this.#inbox}.*`, {
      callback: (err, m) => (err ? undefined : this.#answered(m)),
    });
    nc.subscribe(`$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.${stream}`, {
      callback: (err) => (err ? undefined : this.#republishHeld('the stream elected a leader')),
    });
    this.#timer = setInterval(() => this.#tick(), MARK_MS);
    this.#timer.unref();
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') this.#connected = false;
        else if (s.type === 'reconnect') {
          this.#connected = true;
          // What was in flight when the connection dropped may be lost with it.
          this.#republishHeld('NATS reconnected');
        }
      }
    })().catch(() => {});
    void nc.closed().then(() => clearInterval(this.#timer));
  }

  /** Publishes without waiting; throws only what nc.publish throws (a closed connection). */
  publish(subject: string, payload: string): void {
    const now = Date.now();
    this.#send({ subject, payload, firstAt: now, at: now }, now);
  }

  #send(h: Held, now: number): void {
    if (this.#held.length - this.#head >= MAX_HELD) {
      wakeupsAbandoned.inc({ stream: this.#stream });
      this.#nc.publish(h.subject, h.payload);
      return;
    }
    h.at = now;
    this.#held.push(h);
    if (!this.#trouble && this.#marker === null && now - this.#lastMarkAt >= MARK_MS)
      this.#mark(h, now);
    else this.#nc.publish(h.subject, h.payload);
  }

  /** Wake-ups not yet confirmed stored (for tests). */
  get unconfirmed(): number {
    return this.#base + this.#held.length - this.#confirmed;
  }

  /** Publishes this wake-up as the marker for everything held up to the newest. */
  #mark(h: Held, now: number): void {
    const token = (++this.#seq).toString(36);
    this.#marker = { token, upTo: this.#base + this.#held.length, at: now };
    this.#lastMarkAt = now;
    this.#nc.publish(h.subject, h.payload, { reply: `${this.#inbox}.${token}` });
  }

  #answered(m: Msg): void {
    const marker = this.#marker;
    if (!marker || m.subject !== `${this.#inbox}.${marker.token}`) return;
    this.#marker = null;
    if (!isStored(m.data)) {
      this.#trouble = true;
      return;
    }
    if (this.#trouble) {
      // A probe was stored: the stream has a leader again, and holds nothing of what was refused.
      this.#trouble = false;
      this.#republishHeld('the stream takes wake-ups again');
      return;
    }
    this.#confirmed = Math.max(this.#confirmed, marker.upTo);
  }

  /** Publishes again everything held (the newest as a marker), and holds the copies instead. */
  #republishHeld(why: string): void {
    if (!this.#connected) return;
    const again = this.#held.slice(this.#head);
    this.#held = [];
    this.#base += this.#head + again.length;
    this.#head = 0;
    this.#confirmed = this.#base;
    this.#marker = null;
    if (again.length === 0) return;
    wakeupsRepublished.inc({ stream: this.#stream }, again.length);
    this.#logger.info(
      { stream: this.#stream, count: again.length, why },
      'wake-ups published again',
    );
    const now = Date.now();
    try {
      for (const h of again) this.#send(h, now);
    } catch {
      // closed: nothing more to do
    }
  }

  #tick(): void {
    const now = Date.now();
    if (this.#marker && now - this.#marker.at > ANSWER_WITHIN_MS) {
      this.#marker = null;
      this.#trouble = true;
    }
    this.#release(now);
    if (!this.#connected || this.#marker || this.#head === this.#held.length) return;
    if (this.#trouble) {
      // One probe per tick: the oldest held wake-up, which the stream most likely never stored.
      this.#mark(this.#held[this.#head]!, now);
      return;
    }
    // A quiet spell after a burst that no marker covered: its tail is confirmed without waiting
    // for the next wake-up, at the cost of one copy.
    const newest = this.#held[this.#held.length - 1]!;
    if (this.#confirmed < this.#base + this.#held.length && now - newest.at >= TAIL_MS)
      this.#mark(newest, now);
  }

  /** Lets go of wake-ups confirmed more than HOLD_MS ago, and gives up on those held too long. */
  #release(now: number): void {
    let abandoned = 0;
    while (this.#head < this.#held.length) {
      const h = this.#held[this.#head]!;
      const confirmed = this.#base + this.#head < this.#confirmed;
      if (confirmed && now - h.at > HOLD_MS) this.#head++;
      else if (now - h.firstAt > GIVE_UP_MS) {
        this.#head++;
        abandoned++;
      } else break;
    }
    if (abandoned > 0) {
      wakeupsAbandoned.inc({ stream: this.#stream }, abandoned);
      this.#logger.warn(
        { stream: this.#stream, abandoned },
        'wake-ups not taken by JetStream within 30 s; the sweeper will re-enqueue them',
      );
    }
    // Compacts now and then rather than shifting per wake-up.
    if (this.#head > 1024 && this.#head * 2 > this.#held.length) {
      this.#held = this.#held.slice(this.#head);
      this.#base += this.#head;
      this.#head = 0;
    }
  }
}
