import type {
  ConsumerMessages,
  JetStreamClient,
  JetStreamManager,
  JsMsg,
} from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { handBack } from './hand-back.ts';
import { confirmNaks } from './heard-nak.ts';
import { registerLoop } from './loop-health.ts';

export interface WorkQueueConsumer {
  /**
   * Stops pulling, and returns once the server holds no pull of this loop (filled, or expired: at
   * most a pull's expiry, 2 s) and knows it stopped listening: from then on nothing more comes to
   * this process, and what came meanwhile is handed back (hand-back.ts). Work held elsewhere in the
   * process can then be handed back too, to other processes only.
   */
  stopIntake(): Promise<void>;
  /** Stops pulling (stopIntake) and waits up to timeoutMs for handlers in flight. */
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
  /**
   * Declares streams and consumers again; called when attaching finds the consumer or its stream
   * gone.
   */
  redeclare: () => Promise<unknown>;
  /**
   * Registers a callback for NATS reconnects. A server that restarted may have lost the consumer,
   * and a pull on a vanished consumer only fails at the next missed heartbeat (30 s), so every
   * reconnect re-attaches at once.
   */
  onReconnect?: (listener: () => void) => void;
  /**
   * How often the consumer is checked on the server (gone? work waiting and no pull?). Default 5 s.
   */
  watchEveryMs?: number;
  /**
   * The connection to hear JetStream's leader elections on, to pull from a consumer's new leader at
   * once, and to send naks until a leader hears them (heard-nak.ts). Without it a moved leader is
   * noticed by missed heartbeats (2-3 s), and a nak sent during an election is lost.
   */
  nc?: NatsConnection;
  /**
   * Called when the consumer elected a JetStream leader (heard on `nc`): the store wakes what the
   * old leader may have lost (store/leader-change-rewakes.ts).
   */
  onLeaderElected?: () => void;
}

/** Longest wait for the server to confirm a pull's unsubscribe when ending it (a flush). */
const DRAIN_PULL_MS = 2_000;

/** Restart back-off: from half a second, doubling, to at most ten seconds between tries. */
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

/** Notifications after which the consumer will not deliver again until it is declared anew. */
const GONE = new Set(['consumer_deleted', 'consumer_not_found', 'stream_not_found']);

/*
 * JetStream keeps a consumer's waiting pulls on its leader only. When the leader moves (a step-down
 * in a rolling upgrade, a node lost) they vanish and nobody is told: the new leader has work and no
 * one asking for it. With the library's defaults (a 30 s pull, a 15 s heartbeat, a new pull after
 * two missed heartbeats) every loop stood silent for 30-40 s after each leader change, looking up.
 * Now three things ask the new leader: JetStream's leader-elected advisory (at once), a missed
 * heartbeat (2-3 s; the library pulls again, and the loop is down meanwhile), and the periodic
 * check that sees work waiting on the server with no pull for it.
 */
/**
 * How long one pull waits on the server; also the library's pause between asking a consumer that
 * does not answer, and the longest a stop waits for its pulls to end (unsubscribeFromServer). It
 * was 5 s until a stop had to wait for it: an idle loop then pulls every 2 s instead.
 */
const PULL_EXPIRES_MS = 2_000;
/**
 * How often the server says it still holds an idle pull; two missed and the pull counts as gone.
 */
const PULL_HEARTBEAT_MS = 1_000;
/**
 * Missed heartbeats after which the library's own new pull has had its chance, and the loop
 * attaches anew.
 */
const REATTACH_AFTER_MISSED = 2 + PULL_EXPIRES_MS / PULL_HEARTBEAT_MS;
/**
 * Checks in a row that see work waiting on the server and no pull for it before the loop counts as
 * stalled.
 */
const STALLED_CHECKS = 2;

/**
 * Runs `handle` for each message of a durable JetStream consumer, at most `concurrency` at once,
 * under supervision: a loop whose iterator ends, throws, or whose consumer vanished from the
 * server (deleted, stream lost with a NATS store) re-attaches with back-off, declaring the topology
 * again when its consumer or stream is gone, for as long as the role runs; one whose consumer's
 * leader moved, or whose pull went unanswered, pulls again at once (see above). Changes are
 * warned once each; its state is in the loop-health registry (ens_consumer_up, /readyz). Never
 * throws at start: NATS being away is waited out.
 */
export async function consumeWorkQueue(opts: WorkQueueOptions): Promise<WorkQueueConsumer> {
  const { js, stream, durable, concurrency, handle, logger, redeclare } = opts;
  const health = registerLoop(stream, durable);
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  let current: ConsumerMessages | null = null;
  let wakeRetry: (() => void) | null = null;
  const hasRoom = () => inFlight.size < concurrency;

  // Up and down in the registry, with one warning per change, never one per message or check.
  let up = false;
  let everUp = false;
  let downSince = Date.now();
  /**
   * Set when the loop pulled again because its pulls got nothing (see the watch): a new pull being
   * answered, or heartbeats, prove nothing then, so the loop stays down until a message comes, or
   * until the watch no longer sees work waiting undelivered.
   */
  let downUntilDelivery = false;
  const markUp = (delivered = false) => {
    if (downUntilDelivery && !delivered) return;
    downUntilDelivery = false;
    if (up) return;
    up = true;
    health.up();
    if (everUp)
      logger.warn(
        { stream, durable, downMs: Date.now() - downSince },
        'consume loop taking work again',
      );
    everUp = true;
  };
  const markDown = (reason: string) => {
    if (up) {
      downSince = Date.now();
      logger.warn({ stream, durable, reason }, 'consume loop not taking work');
    }
    up = false;
    health.down(reason);
  };

  // Waits on a freed place, not on Promise.race over every handler: a loop may hold tens of
  // thousands of messages (the send loops' fair window), and racing them all per message is
  // quadratic.
  const placeFreed: (() => void)[] = [];
  const run = async (m: JsMsg) => {
    if (opts.nc) confirmNaks(m, opts.nc, logger);
    while (inFlight.size >= concurrency)
      await new Promise<void>((resolve) => placeFreed.push(resolve));
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

  /**
   * Ends the current attachment so the loop attaches again. `anew` (the consumer is gone) pauses
   * with back-off first; `again` (a reconnect, a pull that went unanswered) attaches at once; `now`
   * (the leader moved) too, and is not a fault.
   */
  type Again = { reason: string; how: 'anew' | 'again' | 'now' };
  let again: Again | null = null;
  /** Wakes the loop from waiting on the current attachment, to attach again or to stop. */
  let attachmentEnded: (() => void) | null = null;
  const restart = (reason: string, how: Again['how'] = 'anew') => {
    if (stopping || !current) return;
    again = { reason, how };
    if (how !== 'now') markDown(reason);
    retire(current);
    attachmentEnded?.();
  };

  /*
   * An attachment's messages are handled by its own pump, so that one being retired goes on being
   * heard while the loop already pulls through the next: the old pulls may stay on the server
   * (filled, or expired, within a pull's expiry) and whatever the server sends them until then
   * still arrives, and is handled, or handed back when stopping (see unsubscribeFromServer).
   */
  const pumps = new Set<Promise<unknown>>();
  const pump = (messages: ConsumerMessages): Promise<Error | null> => {
    const pumping = (async () => {
      for await (const m of messages) {
        if (stopping) {
          // Counted with the handlers, so that stop() waits for it to be back.
          const back: Promise<void> = handBack(js, m, logger).finally(() => inFlight.delete(back));
          inFlight.add(back);
          continue;
        }
        if (messages === current) markUp(true);
        await run(m);
      }
      return null;
    })().catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
    pumps.add(pumping);
    void pumping.finally(() => pumps.delete(pumping));
    return pumping;
  };
  /** Attachments being ended, until their pulls have ended and they are stopped. */
  const retiring = new Map<ConsumerMessages, Promise<void>>();
  const retire = (messages: ConsumerMessages) => {
    if (retiring.has(messages)) return;
    retiring.set(
      messages,
      unsubscribeFromServer(messages).finally(() => {
        messages.stop();
        retiring.delete(messages);
      }),
    );
  };
  opts.onReconnect?.(() => {
    restart('NATS reconnected', 'again');
    wakeRetry?.();
  });
  // A loop that holds all it may has no pull out, so a leader change costs it nothing; one with
  // room has a pull on the old leader, which will never answer. A loop waiting to attach again, or
  // attaching while the consumer had no leader (which answers only with a timeout, a pull's expiry
  // later), tries at once: the consumer has a leader to ask.
  let attachingElected: (() => void) | null = null;
  const elected: Subscription | undefined = opts.nc?.subscribe(
    `$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.${stream}.${durable}`,
    {
      callback: (err) => {
        if (err) return;
        if (hasRoom()) restart('the consumer has a new leader', 'now');
        wakeRetry?.();
        attachingElected?.();
        opts.onLeaderElected?.();
      },
    },
  );

  const attach = async (): Promise<ConsumerMessages> => {
    const consumer = await js.consumers.get(stream, durable);
    const messages = await consumer.consume({
      max_messages: opts.pullBatch ?? concurrency,
      expires: PULL_EXPIRES_MS,
      idle_heartbeat: PULL_HEARTBEAT_MS,
      abort_on_missing_resource: true,
    });
    void (async () => {
      for await (const s of messages.status()) {
        if (current !== messages) continue;
        if (GONE.has(s.type)) restart(`the consumer is gone (${s.type})`);
        // The server holds this pull and is alive: nothing is waiting for anyone.
        else if (s.type === 'heartbeat' || s.type === 'discard') markUp();
        else if (s.type === 'heartbeats_missed' && hasRoom()) {
          // The library pulls again by itself; when that brings no word either, attach anew.
          if (s.count >= REATTACH_AFTER_MISSED)
            restart(`no word from JetStream for ${s.count} s, even after pulling again`, 'again');
          else
            markDown(
              `no word from JetStream for ${s.count} s while waiting for work (the consumer's leader moved or was lost?); pulling again`,
            );
        }
      }
    })().catch(() => {});
    return messages;
  };

  // The library reports a vanished consumer only on its next pull or missed heartbeat: asking the
  // server now and then bounds how long it goes unnoticed. The same answer says, from the server's
  // side, what the advisory and the heartbeats say from ours: work waiting on the server while no
  // pull of any process waits for it, seen twice in a row while this loop has room, is a stall,
  // whatever the client believes.
  let jsm: Promise<JetStreamManager> | null = null;
  let waitingForNobody = 0;
  let unanswered = 0;
  /*
   * The other stall, seen in the soak after a worker was killed beside a NATS node's restart: work
   * waiting on the server, pulls waiting for it (num_waiting > 0), and nothing delivered for tens
   * of seconds (the bulk lane: pending 51 and waiting 2, unchanged for as long as it was watched;
   * sends waited 32-54 s). Between two checks, a consumer with work pending, pulls waiting and room
   * for more must have delivered something; when its delivered sequence stands still, the loop
   * counts as down (ens_consumer_up 0, /readyz), pulls again, and asks the consumer's leader to
   * step down: in that soak round what finally moved the stuck lane was the next round's
   * step-down, and a new leader rebuilds its state from the replicated log. (On one server the
   * request is refused and logged; the pull again remains.) It stays down until a message comes,
   * or the watch sees the delivered sequence move or no work waiting.
   */
  let notDelivering = 0;
  let lastDelivered = -1;
  /** The delivered sequence when the loop last saw such a stall; null once it moved. */
  let stalledAt: number | null = null;
  const askNewLeader = (pending: number) => {
    if (!opts.nc) return;
    opts.nc
      .request(`$JS.API.CONSUMER.LEADER.STEPDOWN.${stream}.${durable}`, undefined, {
        timeout: 5_000,
      })
      .then(
        (answer) =>
          logger.warn(
            { stream, durable, pending, answer: answer.string().slice(0, 200) },
            "asked JetStream to move the consumer's leader: its pulls got none of the work " +
              'waiting',
          ),
        (err: unknown) =>
          logger.warn(
            { err, stream, durable },
            "could not ask JetStream to move the consumer's leader",
          ),
      );
  };
  const watch = setInterval(() => {
    if (!current || stopping) return;
    const attached = current;
    jsm ??= js.jetstreamManager(false);
    jsm
      .then((m) => m.consumers.info(stream, durable))
      .then(
        (info) => {
          if (current !== attached) return;
          unanswered = 0;
          waitingForNobody =
            info.num_pending > 0 && info.num_waiting === 0 && hasRoom() ? waitingForNobody + 1 : 0;
          const delivered = info.delivered.consumer_seq;
          notDelivering =
            info.num_pending > 0 &&
            info.num_waiting > 0 &&
            info.num_ack_pending < (info.config.max_ack_pending ?? Number.POSITIVE_INFINITY) &&
            hasRoom() &&
            delivered === lastDelivered
              ? notDelivering + 1
              : 0;
          lastDelivered = delivered;
          if (stalledAt !== null && (delivered !== stalledAt || info.num_pending === 0)) {
            stalledAt = null;
            markUp(true);
          }
          if (waitingForNobody >= STALLED_CHECKS) {
            waitingForNobody = 0;
            restart(
              `${info.num_pending} messages wait on the server and no pull waits for them`,
              'again',
            );
          } else if (notDelivering >= STALLED_CHECKS - 1) {
            notDelivering = 0;
            downUntilDelivery = true;
            stalledAt = delivered;
            askNewLeader(info.num_pending);
            restart(
              `${info.num_pending} messages wait on the server and its pulls get none of them`,
              'again',
            );
          }
        },
        (err: unknown) => {
          if (current !== attached) return;
          const message = String((err as Error)?.message);
          if (/not found/i.test(message)) restart('the consumer is gone from the server');
          // No leader (an election), or JetStream away: nothing comes while it lasts.
          else if (++unanswered >= STALLED_CHECKS && hasRoom())
            markDown(`JetStream does not answer for the consumer: ${message}`);
        },
      );
  }, opts.watchEveryMs ?? 5_000);
  watch.unref();

  // Only a consumer or stream that is gone needs declaring. Declaring asks JetStream's meta leader
  // and every consumer, which an election after a lost node keeps from answering for seconds;
  // attaching asks only this consumer's leader.
  const attachOrDeclare = () =>
    attach().catch(async (err: unknown) => {
      if (!/not found/i.test(String((err as Error)?.message))) throw err;
      await redeclare();
      return attach();
    });
  const attachUnlessElected = async (): Promise<ConsumerMessages> => {
    for (;;) {
      const attempt = attachOrDeclare();
      const electedMeanwhile = new Promise<null>(
        (resolve) => (attachingElected = () => resolve(null)),
      );
      const attached = await Promise.race([attempt, electedMeanwhile]).finally(
        () => (attachingElected = null),
      );
      if (attached) return attached;
      // Left behind: stopped should it attach after all.
      attempt.then(
        (m) => m.stop(),
        () => {},
      );
    }
  };

  let firstAttempt!: () => void;
  const firstAttemptDone = new Promise<void>((r) => (firstAttempt = r));
  const loop = (async () => {
    let retryMs = FIRST_RETRY_MS;
    while (!stopping) {
      let reason: string;
      try {
        again = null;
        current = await attachUnlessElected();
        if (stopping) {
          retire(current);
          break;
        }
        waitingForNobody = 0;
        notDelivering = 0;
        lastDelivered = -1;
        unanswered = 0;
        markUp();
        firstAttempt();
        retryMs = FIRST_RETRY_MS;
        const attachedAgain = new Promise<null>((r) => (attachmentEnded = () => r(null)));
        const failed = await Promise.race([pump(current), attachedAgain]);
        attachmentEnded = null;
        reason = failed?.message ?? 'the consumer stopped delivering';
      } catch (err) {
        reason = (err as Error)?.message ?? String(err);
      }
      current = null;
      // Set by restart() while the loop ran; TypeScript cannot see that.
      const asked = again as Again | null;
      again = null;
      firstAttempt();
      if (stopping) break;
      if (asked && asked.how !== 'anew') {
        if (asked.how === 'now')
          logger.info({ stream, durable }, "consume loop pulling from the consumer's new leader");
        continue;
      }
      reason = asked?.reason ?? reason;
      markDown(reason);
      logger.warn(
        { stream, durable, reason, retryInMs: retryMs },
        'consume loop stopped; restarting',
      );
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

  let intakeStopped: Promise<void> | null = null;
  const stopIntake = () => {
    intakeStopped ??= (async () => {
      stopping = true;
      clearInterval(watch);
      elected?.unsubscribe();
      wakeRetry?.();
      attachmentEnded?.();
      if (current) retire(current);
      await Promise.all(retiring.values());
    })();
    return intakeStopped;
  };

  return {
    stopIntake,
    async stop(timeoutMs) {
      await stopIntake();
      await Promise.race([
        Promise.allSettled([loop, ...pumps, ...inFlight]),
        new Promise((r) => setTimeout(r, timeoutMs).unref()),
      ]);
      health.remove();
    },
  };
}

/*
 * A pull stays on the server after the client stops listening, until it expires or is filled, and
 * the server goes on sending to it until the unsubscribe arrives: a message sent in that window is
 * dropped by the client and waits out the ack wait (60 s) as delivered. That window opens at a stop
 * and at every pull again (a leader change, a reconnect, a stall): test/nats/work-queue-stop.test.ts
 * lost messages in both. Draining the pull's subscription unsubscribes on the server and keeps
 * receiving until the server has confirmed it (a flush), so everything sent before reaches the
 * loop, which handles it, or hands it back when stopping (hand-back.ts). Meanwhile the library must
 * not ask for more: the server would send it to an inbox nobody listens on.
 *
 * Draining alone still lost 1 message in 1,000 now and then (CI on Node 20; 2 runs in 15 here
 * beside three busy loops; the pull-again case once in a quiet run), with the drain confirmed in
 * milliseconds: the server checks a pull's interest when it picks the pull for a message and sends
 * it later, from another goroutine, so an unsubscribe that lands between the two leaves the message
 * sent to no one. So an attachment being ended first waits, still listening, for its pulls to end
 * on the server (filled, or expired with the server's 408, which the library counts): then nothing
 * can be picked for them. A stop waits for that (at most a pull's expiry); pulling again does not,
 * as the old attachment's pump goes on meanwhile.
 */
async function unsubscribeFromServer(messages: ConsumerMessages): Promise<void> {
  // The library keeps the pull's subscription, its pull function and its count of what its pulls
  // still wait for private; without them (another library version), the plain stop, and the ack
  // wait for what was on its way.
  const internals = messages as unknown as {
    sub?: Subscription;
    pull?: unknown;
    pending?: { msgs?: number; requests?: number };
  };
  const sub = internals.sub;
  if (!sub || sub.isClosed() || typeof sub.drain !== 'function') return;
  if (typeof internals.pull === 'function') internals.pull = () => {};
  await pullsEnded(internals.pending, sub);
  await Promise.race([
    sub.drain().catch(() => {}),
    new Promise((r) => setTimeout(r, DRAIN_PULL_MS).unref()),
  ]);
}

/** Longest wait for a stopping loop's pulls to end: their expiry, and a moment for the 408. */
const PULLS_END_WITHIN_MS = PULL_EXPIRES_MS + 1_000;

async function pullsEnded(
  pending: { msgs?: number; requests?: number } | undefined,
  sub: Subscription,
): Promise<void> {
  if (!pending) return;
  const deadline = Date.now() + PULLS_END_WITHIN_MS;
  const waiting = () => (pending.requests ?? 0) > 0 && (pending.msgs ?? 0) > 0;
  while (waiting() && !sub.isClosed() && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
}
