import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { inTransaction, type Db } from '../db/pool.ts';
import { lostAttemptsSql } from './attempt-rows.ts';
import {
  wakeCallbacks,
  wakeSenders,
  type CallbackWakeup,
  type SendWakeup,
  type WakeupTarget,
} from '../nats/wakeups.ts';

/*
 * Process sessions: how the work of a dead or paused process is retried within seconds instead of
 * after its lease (issue 26), without a second success.
 *
 * Each process that claims work (worker, callbacks) registers a row in process_sessions and beats
 * its heartbeat_at every second, on a connection of its own so that a busy pool never delays a
 * beat. Every claim writes the session's id into the row it leases, in the claim's own UPDATE (no
 * extra write), and claims nothing once the session is gone. A periodic job (jobs/catalogue.ts)
 * looks for sessions whose heartbeat is older than ENS_SESSION_TIMEOUT, in PostgreSQL's clock so
 * that no two hosts' clocks are compared: a process killed with -9 and one paused (SIGSTOP, a
 * frozen VM) look the same. Their claims are ended as a lease running out ends them (the lease
 * cleared, the version moved on, the open attempt marked lost), and their deliveries and callbacks
 * woken, after the commit.
 *
 * The fence is the version: every outcome is a versioned update, and ending a claim moves the
 * version on, so a paused process that wakes up and records its result changes nothing. It then
 * finds its own session gone at its next beat and registers anew.
 *
 * A dead process also held wake-ups it had not claimed yet. JetStream gives them to another
 * process only after their ack wait, and nothing in PostgreSQL says which they were; so after a
 * death, the deliveries and callbacks that are due and not leased are woken again, each once (the
 * duplicates of those another process holds are misses, acknowledged without a send).
 *
 * A process judges others only after its own beats have succeeded for a whole timeout: after
 * PostgreSQL was away (or this process paused), every heartbeat is old, and the live processes
 * need that long to beat again before they can be told from the dead.
 */

/** Rows one wake-again pass after a death takes at most; the next pass takes the rest. */
const REWAKE_BATCH = 1000;

const DEAD_SQL = `
SELECT id FROM process_sessions WHERE heartbeat_at < now() - $1 * interval '1 millisecond'`;

const END_SESSIONS_SQL = `
DELETE FROM process_sessions
 WHERE id IN (SELECT id FROM process_sessions WHERE id = ANY($1::int[])
                 AND heartbeat_at < now() - $2 * interval '1 millisecond' FOR UPDATE SKIP LOCKED)
RETURNING id, pid, host, now() AS ended_at`;

/*
 * Found by scanning the pending rows: claimed_by has no index (a claim would no longer be a HOT
 * update), and this runs only when a session ended with claims.
 */
const END_DELIVERY_CLAIMS_SQL = `
WITH d AS (
  UPDATE deliveries d SET lease_until = NULL, version = d.version + 1
   WHERE d.claimed_by = ANY($1::int[]) AND d.status = 'pending' AND d.lease_until > now()
  RETURNING d.id, d.attempts, d.provider, d.claimed_at, d.channel, d.client_id, d.tenant, d.event_type
), a AS (
  ${lostAttemptsSql('SELECT id, attempts, provider, claimed_at, $2::text FROM d')}
)
SELECT id, channel, client_id AS "clientId", tenant, event_type AS "eventType" FROM d`;

const END_CALLBACK_CLAIMS_SQL = `
UPDATE callbacks c SET lease_until = NULL
 WHERE c.claimed_by = ANY($1::int[]) AND c.status = 'pending' AND c.lease_until > now()
RETURNING c.id, c.client_id AS "clientId"`;

/*
 * Due, not leased, and not woken since the death: swept_at records the wake (as the sweeper's
 * does), so each row is woken once, and a callback held off for later (its swept_at is ahead) is
 * left alone.
 */
const REWAKE_DELIVERIES_SQL = `
UPDATE deliveries SET swept_at = now()
 WHERE id IN (SELECT id FROM deliveries
               WHERE status = 'pending' AND next_attempt_at <= now()
                 AND (lease_until IS NULL OR lease_until < now())
                 AND (swept_at IS NULL OR swept_at < $1)
               ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING id, channel, client_id AS "clientId", tenant, event_type AS "eventType"`;

const REWAKE_CALLBACKS_SQL = `
UPDATE callbacks SET swept_at = now()
 WHERE id IN (SELECT id FROM callbacks
               WHERE status = 'pending' AND next_attempt_at <= now()
                 AND (lease_until IS NULL OR lease_until < now())
                 AND (swept_at IS NULL OR swept_at < $1)
               ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING id, client_id AS "clientId"`;

const LOST_ERROR = 'its process stopped or paused during the attempt';
/** What one pass of the dead-session job did. */
export interface Reaped {
  /** The sessions it ended. */
  sessions: { id: number; pid: number; host: string }[];
  deliveries: number;
  callbacks: number;
  /** Deliveries and callbacks woken again because a dead process may have held their wake-ups. */
  rewoken: number;
}

/**
 * This process's session: registered by start(), beaten every `timeoutMs / 5` (a second at most),
 * ended by stop(). `id()` is what claims record; it changes when the session was ended by another
 * process (this one was paused) and registered anew.
 */
export class ProcessSession {
  #id: number | null = null;
  /** When the current unbroken run of successful beats began (Date.now()); 0 while broken. */
  #healthySince = 0;
  #lastBeat = 0;
  #timer: NodeJS.Timeout | null = null;
  #beating: Promise<void> | null = null;
  #users = 0;
  readonly #everyMs: number;

  /**
   * @param db a pool of its own (one connection is enough), so that no queue of work delays a beat
   * @param timeoutMs ENS_SESSION_TIMEOUT: a session this long without a beat is declared dead
   */
  constructor(
    private readonly db: Db,
    readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {
    this.#everyMs = Math.min(1_000, Math.max(50, Math.floor(timeoutMs / 5)));
  }

  /** The session claims record now; null before start() and while it is being registered anew. */
  id(): number | null {
    return this.#id;
  }

  /**
   * True when this process's beats have succeeded, without a gap, for a whole timeout: only then
   * can it tell a dead session from a live one that has not beaten since PostgreSQL came back.
   */
  mayJudge(now = Date.now()): boolean {
    return (
      this.#id !== null &&
      this.#healthySince > 0 &&
      now - this.#healthySince >= this.timeoutMs &&
      now - this.#lastBeat < this.timeoutMs
    );
  }

  /**
   * Registers the session and starts beating; called by each role that claims, the first call
   * registers. Throws when PostgreSQL cannot be reached (the role's start is retried).
   */
  async start(): Promise<void> {
    this.#users++;
    if (this.#users > 1) return;
    try {
      await this.#register();
    } catch (err) {
      // The role's start is tried again, and must register then.
      this.#users--;
      throw err;
    }
    this.#timer = setInterval(() => {
      this.#beating ??= this.#beat().finally(() => (this.#beating = null));
    }, this.#everyMs);
    this.#timer.unref();
  }

  /**
   * Stops beating and ends the session, once every role that started it has stopped: the claims
   * it still holds (sends cut off by the stop's grace) are ended and woken at once, as a dead
   * session's are. Never throws; a session left behind is ended by the other processes' job.
   */
  async stop(reaper: SessionReaper | null): Promise<void> {
    if (this.#users === 0 || --this.#users > 0) return;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#beating;
    const id = this.#id;
    this.#id = null;
    if (id === null) return;
    try {
      if (reaper) await reaper.end([id], 0);
      else await this.db.query('DELETE FROM process_sessions WHERE id = $1', [id]);
    } catch (err) {
      this.logger.warn({ err, session: id }, 'could not end this process session');
    }
  }

  async #register(): Promise<void> {
    const { rows } = await this.db.query<{ id: number }>(
      'INSERT INTO process_sessions (pid, host) VALUES ($1, $2) RETURNING id',
      [process.pid, hostname()],
    );
    this.#id = rows[0]!.id;
    this.#lastBeat = this.#healthySince = Date.now();
  }

  async #beat(): Promise<void> {
    const id = this.#id;
    try {
      if (id === null) {
        await this.#register();
        this.logger.info({ session: this.#id }, 'process session registered anew');
        return;
      }
      const r = await this.db.query(
        'UPDATE process_sessions SET heartbeat_at = now() WHERE id = $1',
        [id],
      );
      if (r.rowCount === 0) {
        // Declared dead while paused or cut off: what it claimed was ended and given to others.
        this.#id = null;
        this.#healthySince = 0;
        this.logger.warn(
          { session: id },
          'declared dead by another process (no heartbeat within ENS_SESSION_TIMEOUT); ' +
            'its claims went to others; registering anew',
        );
        await this.#register();
        return;
      }
      const now = Date.now();
      // A gap as long as a timeout (this process paused) breaks the run as a failed beat does; a
      // shorter one (a busy machine) does not, or a loaded process would never judge.
      if (this.#healthySince === 0 || now - this.#lastBeat >= this.timeoutMs)
        this.#healthySince = now;
      this.#lastBeat = now;
    } catch (err) {
      this.#healthySince = 0;
      this.logger.debug({ err }, 'process session heartbeat failed; will try again');
    }
  }
}

/**
 * Ends dead sessions and their claims (see the module comment); run by each worker process's
 * dead-sessions job. Wakes what it released after each commit.
 */
export class SessionReaper {
  /** Set after a death: rows not woken since then are woken again, a batch a pass. */
  #rewakeSince: Date | null = null;

  constructor(
    private readonly db: Db,
    private readonly session: ProcessSession,
    private readonly wake: WakeupTarget | null,
  ) {}

  /**
   * One pass: while nothing is dead, one statement that reads the few rows of process_sessions.
   * Does nothing while this process may not judge (see ProcessSession.mayJudge).
   */
  async pass(): Promise<Reaped | null> {
    let reaped: Reaped | null = null;
    if (this.session.mayJudge()) {
      const dead = await this.db.query<{ id: number }>({
        name: 'ens-dead-sessions',
        text: DEAD_SQL,
        values: [this.session.timeoutMs],
      });
      if (dead.rows.length > 0)
        reaped = await this.end(
          dead.rows.map((r) => r.id),
          this.session.timeoutMs,
        );
    }
    if (this.#rewakeSince !== null) {
      const n = await this.#rewake(this.#rewakeSince);
      if (reaped) reaped.rewoken = n;
    }
    return reaped;
  }

  /**
   * Ends these sessions, if their heartbeat is older than `staleMs` (0: at once, for this process's
   * own at its stop), with their claims, in one transaction; wakes the released work after it.
   */
  async end(ids: number[], staleMs: number): Promise<Reaped | null> {
    const out = await inTransaction(this.db, async (c) => {
      const ended = await c.query<{ id: number; pid: number; host: string; ended_at: Date }>(
        END_SESSIONS_SQL,
        [ids, staleMs],
      );
      if (ended.rows.length === 0) return null;
      const sessions = ended.rows.map((r) => r.id);
      const deliveries = await c.query<SendWakeup>(END_DELIVERY_CLAIMS_SQL, [sessions, LOST_ERROR]);
      const callbacks = await c.query<CallbackWakeup>(END_CALLBACK_CLAIMS_SQL, [sessions]);
      return {
        endedAt: ended.rows[0]!.ended_at,
        reaped: {
          sessions: ended.rows.map((r) => ({ id: r.id, pid: r.pid, host: r.host })),
          deliveries: deliveries.rows,
          callbacks: callbacks.rows,
        },
      };
    });
    if (out === null) return null;
    const { reaped, endedAt } = out;
    if (this.wake) {
      if (reaped.deliveries.length > 0)
        wakeSenders(this.wake.nc, reaped.deliveries, this.wake.logger);
      if (reaped.callbacks.length > 0)
        wakeCallbacks(this.wake.nc, reaped.callbacks, this.wake.logger);
    }
    // Its own end at a clean stop handed its held wake-ups back itself.
    if (staleMs > 0) this.#rewakeSince = endedAt;
    const rewoken = staleMs > 0 ? await this.#rewake(endedAt) : 0;
    return {
      sessions: reaped.sessions,
      deliveries: reaped.deliveries.length,
      callbacks: reaped.callbacks.length,
      rewoken,
    };
  }

  async #rewake(since: Date): Promise<number> {
    const deliveries = await this.db.query<SendWakeup>(REWAKE_DELIVERIES_SQL, [
      since,
      REWAKE_BATCH,
    ]);
    const callbacks = await this.db.query<CallbackWakeup>(REWAKE_CALLBACKS_SQL, [
      since,
      REWAKE_BATCH,
    ]);
    if (this.wake) {
      if (deliveries.rows.length > 0) wakeSenders(this.wake.nc, deliveries.rows, this.wake.logger);
      if (callbacks.rows.length > 0) wakeCallbacks(this.wake.nc, callbacks.rows, this.wake.logger);
    }
    if (deliveries.rows.length < REWAKE_BATCH && callbacks.rows.length < REWAKE_BATCH)
      this.#rewakeSince = null;
    return deliveries.rows.length + callbacks.rows.length;
  }
}
