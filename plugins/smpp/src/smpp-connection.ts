import smpp, { type PDU, type Session } from 'smpp';
import { transientError, type PluginLogger, type ProviderError } from '@ens/plugin-sdk';
import { AUTH_FAILURES, describeStatus } from './command-status.ts';

/**
 * One SMPP session to the SMSC that stays bound: it connects and binds, keeps the link alive with
 * enquire_link, answers the SMSC's requests, and after any loss (socket closed, bind refused, a
 * keep-alive unanswered, an unbind from the SMSC) reconnects with exponential back-off until
 * close(). Sends never wait for a reconnect scheduled later: while the session is down they fail
 * at once (transient), so the worker's retry and failover decide what happens next.
 */

export type BindCommand = 'bind_transceiver' | 'bind_transmitter' | 'bind_receiver';

export interface ConnectionOptions {
  host: string;
  port: number;
  tls: boolean;
  tlsCa?: string;
  systemId: string;
  password: string;
  systemType: string;
  bind: BindCommand;
  enquireLinkMs: number;
  reconnectMinMs: number;
  reconnectMaxMs: number;
  connectTimeoutMs: number;
  submitTimeoutMs: number;
  windowSize: number;
  logger: PluginLogger;
  /** Handles a deliver_sm; resolves with the command_status of the deliver_sm_resp. */
  onDeliver(pdu: PDU): Promise<number>;
}

type State = 'connecting' | 'bound' | 'down' | 'closed';

/** SMPP 3.4 in the bind's interface_version (node-smpp would send 0x50, version 5.0). */
const INTERFACE_VERSION_34 = 0x34;

interface Waiter {
  resolve(): void;
  reject(e: ProviderError): void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export class SmppConnection {
  private state: State = 'down';
  private session: Session | undefined;
  /** Set by close(): no new sends, no reconnects. */
  private stopped = false;
  private closing: Promise<void> | undefined;
  /** The session that completed its bind, to tell a lost link from a failed attempt. */
  private boundSession: Session | undefined;
  /** Whether the current session's end was already explained (drop, unbind) before 'close'. */
  private explained = false;
  /** Whether the current attempt's failure was already logged (a bind refusal is, as an error). */
  private logged = false;
  private backoffMs: number;
  /**
   * Why the session is not bound (last socket error, bind refusal…), for send errors and
   * checkCredentials.
   */
  private problem = 'not connected yet';
  private reconnectTimer: NodeJS.Timeout | undefined;
  private connectTimer: NodeJS.Timeout | undefined;
  private enquireTimer: NodeJS.Timeout | undefined;
  private enquireDeadline: NodeJS.Timeout | undefined;
  private boundWaiters = new Set<Waiter>();
  private inflight = new Set<{ fail(e: ProviderError): void }>();
  private windowQueue: Array<{ grant(): void; fail(e: ProviderError): void }> = [];
  private windowUsed = 0;
  readonly address: string;

  constructor(private readonly o: ConnectionOptions) {
    this.backoffMs = o.reconnectMinMs;
    this.address = `${o.host}:${o.port}`;
  }

  get bound(): boolean {
    return this.state === 'bound';
  }

  start(): void {
    this.connect();
  }

  private log(level: 'info' | 'warn' | 'error', obj: object, msg: string): void {
    this.o.logger[level](
      { smsc: this.address, systemId: this.o.systemId, bind: this.o.bind, ...obj },
      msg,
    );
  }

  private connect(): void {
    if (this.stopped) return;
    this.reconnectTimer = undefined;
    this.state = 'connecting';
    this.explained = false;
    this.logged = false;
    const s = smpp.connect({
      host: this.o.host,
      port: this.o.port,
      tls: this.o.tls,
      ...(this.o.tls && this.o.tlsCa ? { ca: this.o.tlsCa } : {}),
    });
    this.session = s;
    this.connectTimer = setTimeout(
      () => this.drop(s, `no ${this.o.bind}_resp within ${this.o.connectTimeoutMs} ms`),
      this.o.connectTimeoutMs,
    );
    // node-smpp also emits 'error' for an unparsable PDU and then stops reading the socket:
    // every error ends the session so that a fresh one replaces it.
    s.on('error', (e: Error) => this.drop(s, e.message));
    s.on('close', () => this.onClose(s));
    s.on(this.o.tls ? 'secureConnect' : 'connect', () => this.bind(s));
    s.on('enquire_link', (pdu: PDU) => void s.send(pdu.response()));
    s.on('unbind', (pdu: PDU) => {
      if (this.session === s) {
        this.problem = 'the SMSC unbound the session';
        this.explained = true;
        this.state = 'down';
      }
      s.send(pdu.response(), () => s.close());
    });
    s.on('deliver_sm', (pdu: PDU) => void this.deliver(s, pdu));
    // Commands node-smpp does not know get a generic_nack, as the specification asks.
    s.on('unknown', (pdu: PDU) => void s.send(pdu.response()));
  }

  private bind(s: Session): void {
    const pdu = new smpp.PDU(this.o.bind, {
      system_id: this.o.systemId,
      password: this.o.password,
      system_type: this.o.systemType,
      interface_version: INTERFACE_VERSION_34,
    });
    s.send(pdu, (resp) => {
      if (s !== this.session || this.state !== 'connecting') return;
      clearTimeout(this.connectTimer);
      if (resp.command_status !== 0) {
        const why = `${this.o.bind} refused: ${describeStatus(resp.command_status)}`;
        const hint = AUTH_FAILURES.has(resp.command_status)
          ? ' (check systemId, password and systemType)'
          : '';
        this.log(
          'error',
          { commandStatus: resp.command_status },
          `smpp: ${this.address} ${why}${hint}; retrying with back-off`,
        );
        this.logged = true;
        this.drop(s, why);
        return;
      }
      this.state = 'bound';
      this.boundSession = s;
      this.backoffMs = this.o.reconnectMinMs;
      this.problem = '';
      this.log('info', {}, `smpp: bound to ${this.address} (${this.o.bind})`);
      this.startEnquireLink(s);
      for (const w of this.boundWaiters) w.resolve();
      this.boundWaiters.clear();
    });
  }

  private startEnquireLink(s: Session): void {
    // The reply must come before the next keep-alive is due (or within submitTimeoutMs if sooner).
    const replyMs = Math.min(this.o.enquireLinkMs, this.o.submitTimeoutMs);
    this.enquireTimer = setInterval(() => {
      if (this.enquireDeadline) return;
      this.enquireDeadline = setTimeout(() => {
        this.enquireDeadline = undefined;
        this.drop(s, `no enquire_link_resp within ${replyMs} ms`);
      }, replyMs);
      s.send(new smpp.PDU('enquire_link', {}), () => {
        clearTimeout(this.enquireDeadline);
        this.enquireDeadline = undefined;
      });
    }, this.o.enquireLinkMs);
    this.enquireTimer.unref();
  }

  private stopTimers(): void {
    clearTimeout(this.connectTimer);
    clearInterval(this.enquireTimer);
    clearTimeout(this.enquireDeadline);
    this.connectTimer = this.enquireTimer = this.enquireDeadline = undefined;
  }

  /** Ends the session after a failure; 'close' follows and schedules the reconnect. */
  private drop(s: Session, why: string): void {
    if (s !== this.session) return;
    this.problem = why;
    this.explained = true;
    if (this.state !== 'closed') this.state = 'down';
    this.stopTimers();
    this.failBoundWaiters();
    s.destroy();
  }

  private failBoundWaiters(): void {
    const e = this.notBound();
    for (const w of this.boundWaiters) w.reject(e);
    this.boundWaiters.clear();
  }

  private onClose(s: Session): void {
    if (s !== this.session) return;
    const wasBound = this.boundSession === s;
    if (!this.explained)
      this.problem = wasBound
        ? 'the SMSC closed the connection'
        : `the connection closed before the bind completed`;
    this.session = undefined;
    this.boundSession = undefined;
    this.stopTimers();
    const lost = transientError(
      `smpp: connection to ${this.address} lost before submit_sm_resp (${this.problem})`,
    );
    for (const f of this.inflight) f.fail(lost);
    this.inflight.clear();
    if (this.stopped) {
      this.state = 'closed';
      return;
    }
    this.state = 'down';
    this.failBoundWaiters();
    const delay = Math.round(this.backoffMs * (0.8 + Math.random() * 0.4)); // jitter: many ENS workers must not reconnect in step
    this.backoffMs = Math.min(this.backoffMs * 2, this.o.reconnectMaxMs);
    if (wasBound)
      this.log(
        'warn',
        {},
        `smpp: connection to ${this.address} lost (${this.problem}); reconnecting in ${delay} ms`,
      );
    else if (!this.logged)
      this.log(
        'warn',
        {},
        `smpp: cannot bind to ${this.address} (${this.problem}); retrying in ${delay} ms`,
      );
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
    this.reconnectTimer.unref();
  }

  private async deliver(s: Session, pdu: PDU): Promise<void> {
    let status: number;
    try {
      status = await this.o.onDeliver(pdu);
    } catch (e) {
      // ESME_RX_T_APPN asks the SMSC to deliver the receipt again later.
      this.log(
        'error',
        { err: e },
        'smpp: handling a deliver_sm failed; answering ESME_RX_T_APPN so the SMSC retries',
      );
      status = 0x64;
    }
    s.send(pdu.response({ command_status: status }));
  }

  private notBound(): ProviderError {
    if (this.stopped)
      return transientError(`smpp: not bound to ${this.address}: the provider is closed`);
    return transientError(
      `smpp: not bound to ${this.address}${this.problem ? `: ${this.problem}` : ''}`,
    );
  }

  /**
   * Resolves once bound; waits only for a connection attempt already under way, up to `deadline`.
   */
  private async whenBound(deadline: number): Promise<Session> {
    if (this.state === 'connecting' && !this.stopped) {
      await new Promise<void>((resolve, reject) => {
        const w: Waiter = {
          resolve: () => {
            clearTimeout(t);
            resolve();
          },
          reject: (e) => {
            clearTimeout(t);
            reject(e);
          },
        };
        const t = setTimeout(
          () => {
            this.boundWaiters.delete(w);
            reject(transientError(`smpp: not bound to ${this.address}: still connecting`));
          },
          Math.max(0, deadline - Date.now()),
        );
        this.boundWaiters.add(w);
      });
    }
    if (this.state !== 'bound' || !this.session || this.stopped) throw this.notBound();
    return this.session;
  }

  private async acquireWindow(deadline: number): Promise<void> {
    if (this.windowUsed < this.o.windowSize) {
      this.windowUsed++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          clearTimeout(t);
          resolve();
        },
        fail: (e: ProviderError) => {
          clearTimeout(t);
          reject(e);
        },
      };
      const t = setTimeout(
        () => {
          const i = this.windowQueue.indexOf(entry);
          if (i >= 0) this.windowQueue.splice(i, 1);
          reject(
            transientError(
              `smpp: ${this.o.windowSize} submit_sm already awaiting ${this.address}'s answer for ${this.o.submitTimeoutMs} ms`,
            ),
          );
        },
        Math.max(0, deadline - Date.now()),
      );
      this.windowQueue.push(entry);
    });
  }

  private releaseWindow(): void {
    const next = this.windowQueue.shift();
    if (next)
      next.grant(); // the slot passes straight to the next waiter
    else this.windowUsed--;
  }

  /**
   * Sends a request and resolves with the response PDU (whatever its command_status), within the
   * submit window and submitTimeoutMs. Rejects (transient) when unbound, on timeout, or when the
   * connection is lost before the answer.
   */
  async request(command: string, params: Record<string, unknown>): Promise<PDU> {
    const deadline = Date.now() + this.o.submitTimeoutMs;
    await this.whenBound(deadline);
    await this.acquireWindow(deadline);
    try {
      const s = await this.whenBound(deadline); // the session may have gone while waiting for a slot
      return await new Promise<PDU>((resolve, reject) => {
        const entry = {
          fail: (e: ProviderError) => {
            clearTimeout(t);
            reject(e);
          },
        };
        const t = setTimeout(
          () => {
            this.inflight.delete(entry);
            reject(
              transientError(
                `smpp: no ${command}_resp from ${this.address} within ${this.o.submitTimeoutMs} ms`,
              ),
            );
          },
          Math.max(0, deadline - Date.now()),
        );
        this.inflight.add(entry);
        const sent = s.send(new smpp.PDU(command, params), (resp) => {
          if (!this.inflight.delete(entry)) return; // timed out or lost already
          clearTimeout(t);
          resolve(resp);
        });
        if (!sent) {
          this.inflight.delete(entry);
          entry.fail(this.notBound());
        }
      });
    } finally {
      this.releaseWindow();
    }
  }

  /**
   * Resolves when bound; when down, tries to bind now (skipping the back-off) and reports the
   * outcome.
   */
  async checkBound(): Promise<void> {
    if (this.state === 'bound') return;
    if (this.stopped) throw this.notBound();
    if (this.state === 'down') {
      clearTimeout(this.reconnectTimer);
      this.connect();
    }
    await this.whenBound(Date.now() + this.o.connectTimeoutMs);
  }

  /**
   * Waits for answers in flight, unbinds, closes the socket, and stops reconnecting. Idempotent.
   */
  close(): Promise<void> {
    if (!this.closing) {
      this.stopped = true;
      this.closing = this.shutdown();
    }
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    clearTimeout(this.reconnectTimer);
    const closed = transientError(`smpp: not bound to ${this.address}: the provider is closed`);
    for (const w of this.windowQueue) w.fail(closed);
    this.windowQueue = [];
    this.failBoundWaiters();
    const s = this.session;
    if (!s) {
      this.state = 'closed';
      return;
    }
    const until = Date.now() + this.o.submitTimeoutMs;
    while (this.inflight.size > 0 && Date.now() < until && this.session === s) await sleep(10);
    if (this.state === 'bound' && this.session === s) {
      clearInterval(this.enquireTimer);
      clearTimeout(this.enquireDeadline);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(this.o.submitTimeoutMs, 5_000));
        const sent = s.send(new smpp.PDU('unbind', {}), () => {
          clearTimeout(t);
          resolve();
        });
        if (!sent) {
          clearTimeout(t);
          resolve();
        }
      });
    }
    if (this.session === s) {
      await new Promise<void>((resolve) => {
        s.socket.once('close', () => resolve());
        s.close();
        setTimeout(() => s.destroy(), 1_000).unref(); // an SMSC that never closes its side
        if (s.socket.destroyed) resolve();
      });
    }
    this.stopTimers();
    this.state = 'closed';
    this.log('info', {}, `smpp: closed the session to ${this.address}`);
  }
}
