/**
 * A fake SMSC (an SMPP 3.4 server built on node-smpp's createServer) for the plugin's tests and
 * ENS's end-to-end run. It checks bind credentials, answers submit_sm with message ids or with any
 * command_status, sends delivery receipts as deliver_sm (TLV and appendix B text forms), answers
 * and sends enquire_link and unbind, can drop every connection or refuse binds for a while, and
 * delivers mobile-originated messages (sendMo: a phone texting STOP to one of the account's
 * numbers). It keeps every PDU it received with its raw octets.
 *
 * Answers by destination: a destination_addr ending in "99" then four digits is answered with that
 * command_status in decimal, e.g. …990088 → ESME_RTHROTTLED (0x58 = 88); errorRecipient(status)
 * builds such a number.
 *
 * Docs used:
 * - SMPP v3.4 specification (Issue 1.2): https://smpp.org/SMPP_v3_4_Issue1_2.pdf — 4.1 bind
 *   operations, 4.4 submit_sm, 4.6 deliver_sm, 4.11 enquire_link, 4.2 unbind, 5.1.3 command_status,
 *   5.2.12 esm_class, 5.3.2 TLVs (receipted_message_id, message_state, network_error_code),
 *   appendix B delivery receipt format.
 * - SMPP v5.0 specification: https://smpp.org/SMPP_v5.pdf (4.7.5 message_state values).
 * - node-smpp: https://github.com/farhadi/node-smpp#readme
 */
import type { Socket } from 'node:net';
import smpp, { type PDU, type Server, type Session } from 'smpp';

export const ESME = {
  ROK: 0x00,
  RINVMSGLEN: 0x01,
  RINVBNDSTS: 0x04,
  RALYBND: 0x05,
  RSYSERR: 0x08,
  RINVSRCADR: 0x0a,
  RINVDSTADR: 0x0b,
  RBINDFAIL: 0x0d,
  RINVPASWD: 0x0e,
  RINVSYSID: 0x0f,
  RMSGQFUL: 0x14,
  RSUBMITFAIL: 0x45,
  RTHROTTLED: 0x58,
  RINVDCS: 0x104,
} as const;

/** An E.164 recipient the fake answers with `status` (see the header). */
export function errorRecipient(status: number, prefix = '+1555012'): string {
  return `${prefix}99${String(status).padStart(4, '0')}`;
}

export function statusForDestination(destination: string): number | null {
  const m = /99(\d{4})$/.exec(destination);
  return m ? Number(m[1]) : null;
}

export type ReceiptFormat = 'tlv' | 'text' | 'both';
export type ReceiptStat =
  | 'DELIVRD'
  | 'UNDELIV'
  | 'REJECTD'
  | 'EXPIRED'
  | 'DELETED'
  | 'UNKNOWN'
  | 'ENROUTE'
  | 'ACCEPTD';

const MESSAGE_STATE: Record<ReceiptStat, number> = {
  ENROUTE: 1,
  DELIVRD: 2,
  EXPIRED: 3,
  DELETED: 4,
  UNDELIV: 5,
  ACCEPTD: 6,
  UNKNOWN: 7,
  REJECTD: 8,
};

export interface ReceiptOptions {
  stat?: ReceiptStat;
  /** Network error code, three digits in the text form, network_error_code in the TLV form. */
  err?: string;
  format?: ReceiptFormat;
  /** The "done date" written in the text form; now when absent. */
  doneDate?: Date;
}

/**
 * A text a phone sends to one of the account's numbers, delivered as a mobile-originated
 * deliver_sm.
 */
export interface MobileOriginated {
  /** The phone, E.164 ('+' optional): source_addr, international/ISDN. */
  from: string;
  /** The number it texted (a long number or a short code): destination_addr. */
  to: string;
  text: string;
  /** UCS-2 (data_coding 8) instead of the GSM default alphabet (0). */
  ucs2?: boolean;
  /** Overrides esm_class (0: a plain short message) for odd SMSCs. */
  esmClass?: number;
  /** Overrides source_addr_ton (1: international). */
  sourceTon?: number;
}

export interface ReceivedPdu {
  /** Which connection (1, 2…) it came on. */
  connection: number;
  command: string;
  commandStatus: number;
  sequenceNumber: number;
  /** The PDU exactly as it arrived, header included. */
  raw: Buffer;
  /** node-smpp's decoding of it. */
  pdu: PDU;
}

export interface ReceivedBind {
  connection: number;
  command: string;
  systemId: string;
  password: string;
  systemType: string;
  interfaceVersion: number;
  /** What the fake answered. */
  status: number;
}

export interface ReceivedSubmit {
  connection: number;
  serviceType: string;
  sourceTon: number;
  sourceNpi: number;
  sourceAddr: string;
  destTon: number;
  destNpi: number;
  destinationAddr: string;
  esmClass: number;
  registeredDelivery: number;
  dataCoding: number;
  /** short_message octets as sent, UDH included. */
  shortMessage: Buffer;
  /** The UDH (with its length octet) when esm_class has the UDHI bit. */
  udh: Buffer | null;
  /** short_message without the UDH. */
  payload: Buffer;
  /** The text as node-smpp decodes the payload (GSM 03.38 for 0, UCS-2 for 8). */
  text: string;
  /** What the fake answered: its message id (null on error or stall) and status. */
  messageId: string | null;
  status: number | null;
}

export interface FakeSmscOptions {
  systemId?: string;
  password?: string;
  /** TLS key and certificate: the fake then speaks SMPP over TLS. */
  tls?: { key: string | Buffer; cert: string | Buffer };
}

interface Conn {
  id: number;
  session: Session;
  bound: 'transceiver' | 'transmitter' | 'receiver' | null;
  lastRaw: Buffer | null;
}

const BIND_MODE = {
  bind_transceiver: 'transceiver',
  bind_transmitter: 'transmitter',
  bind_receiver: 'receiver',
} as const;

/** Walks submit_sm's mandatory parameters (SMPP v3.4 4.4.1) to the short_message octets. */
function rawShortMessage(raw: Buffer): Buffer {
  let o = 16;
  const cstr = () => {
    const end = raw.indexOf(0, o);
    o = end + 1;
  };
  cstr(); // service_type
  o += 2; // source ton, npi
  cstr(); // source_addr
  o += 2; // dest ton, npi
  cstr(); // destination_addr
  o += 3; // esm_class, protocol_id, priority_flag
  cstr(); // schedule_delivery_time
  cstr(); // validity_period
  o += 4; // registered_delivery, replace_if_present_flag, data_coding, sm_default_msg_id
  const len = raw[o]!;
  return raw.subarray(o + 1, o + 1 + len);
}

const yymmddhhmm = (d: Date) =>
  [
    d.getUTCFullYear() % 100,
    d.getUTCMonth() + 1,
    d.getUTCDate(),
    d.getUTCHours(),
    d.getUTCMinutes(),
  ]
    .map((n) => String(n).padStart(2, '0'))
    .join('');

export class FakeSmsc {
  readonly systemId: string;
  readonly password: string;
  readonly host = '127.0.0.1';
  port = 0;

  /** Every PDU received from clients, in order. */
  readonly received: ReceivedPdu[] = [];
  readonly binds: ReceivedBind[] = [];
  readonly submits: ReceivedSubmit[] = [];
  /** deliver_sm_resp statuses the client answered, by the receipted message id. */
  readonly deliverResponses: { messageId: string; status: number }[] = [];

  // Knobs.
  /**
   * Answer submit_sm with this status, or with what the function returns for it (null: by
   * destination, else ESME_ROK).
   */
  submitStatus: number | ((submit: ReceivedSubmit) => number | null) | null = null;
  /** Keep submit_sm unanswered (the client's timeout path); releaseStalled() answers them. */
  stallSubmits = false;
  /** Leave enquire_link unanswered (the client must reconnect). */
  ignoreEnquireLink = false;
  /** Delivery receipts sent after each accepted submit_sm that asked for one. */
  receipts: { send: boolean; delayMs: number } & Required<
    Omit<ReceiptOptions, 'doneDate' | 'err'>
  > & { err: string } = {
    send: true,
    delayMs: 20,
    stat: 'DELIVRD',
    err: '000',
    format: 'both',
  };

  private server: Server | undefined;
  private readonly conns = new Set<Conn>();
  private nextConn = 1;
  private nextId = 0x3a000000 + Math.floor(Math.random() * 0xffffff);
  private refuseStatus: number | null = null;
  private refuseUntil = 0;
  private readonly timers = new Set<NodeJS.Timeout>();
  private stalled: { conn: Conn; pdu: PDU; submit: ReceivedSubmit }[] = [];
  private readonly opts: FakeSmscOptions;

  constructor(opts: FakeSmscOptions = {}) {
    this.opts = opts;
    this.systemId = opts.systemId ?? 'ens';
    this.password = opts.password ?? 'secret';
  }

  /** smpp://127.0.0.1:<port> once started (ssmpp:// with TLS, as node-smpp writes it). */
  get url(): string {
    return `${this.opts.tls ? 'ssmpp' : 'smpp'}://${this.host}:${this.port}`;
  }

  /** Listens on 127.0.0.1 (port 0 = any free port; give the old port to come back after stop()). */
  async start(port = 0): Promise<{ host: string; port: number }> {
    const server = smpp.createServer(
      this.opts.tls ? { key: this.opts.tls.key, cert: this.opts.tls.cert } : {},
      (s) => this.onSession(s),
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // A TLS client that gives up mid-handshake must not crash the fake.
    server.on('tlsClientError', () => {});
    this.server = server;
    const addr = server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : port;
    return { host: this.host, port: this.port };
  }

  /** Drops every connection and stops listening; start(port) brings it back. */
  async stop(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.stalled = [];
    const server = this.server;
    this.server = undefined;
    this.dropConnections();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Destroys every connection without unbind, as a network failure would. */
  dropConnections(): void {
    for (const c of this.conns) c.session.destroy();
  }

  /**
   * Answers binds with `status` (ESME_RBINDFAIL by default) for `forMs`, or until acceptBinds().
   */
  refuseBinds(status: number = ESME.RBINDFAIL, forMs = Infinity): void {
    this.refuseStatus = status;
    this.refuseUntil = Date.now() + forMs;
  }

  acceptBinds(): void {
    this.refuseStatus = null;
  }

  /** How many connections are bound now. */
  get boundCount(): number {
    return [...this.conns].filter((c) => c.bound).length;
  }

  /** Sends unbind on every bound connection, as an SMSC going down for maintenance does. */
  async unbindAll(): Promise<number> {
    const answered = await Promise.all(
      [...this.conns]
        .filter((c) => c.bound)
        .map((c) => this.request(c, new smpp.PDU('unbind', {}))),
    );
    return answered.filter((r) => r !== null).length;
  }

  /**
   * Sends enquire_link on every bound connection; resolves with how many answered enquire_link_resp
   * within `ms`.
   */
  async enquireLink(ms = 2_000): Promise<number> {
    const answered = await Promise.all(
      [...this.conns]
        .filter((c) => c.bound)
        .map((c) => this.request(c, new smpp.PDU('enquire_link', {}), ms)),
    );
    return answered.filter((r) => r?.command === 'enquire_link_resp' && r.command_status === 0)
      .length;
  }

  /** Answers the stalled submit_sm (with the status they would have had). */
  releaseStalled(): void {
    const stalled = this.stalled;
    this.stalled = [];
    for (const { conn, pdu, submit } of stalled) this.answerSubmit(conn, pdu, submit);
  }

  /**
   * Sends a delivery receipt for `messageId` to a receiving connection of the account; resolves
   * with the client's deliver_sm_resp command_status.
   */
  async sendReceipt(
    messageId: string,
    opts: ReceiptOptions = {},
    about?: ReceivedSubmit,
  ): Promise<number> {
    const conn = this.receivingConn(about?.connection);
    if (!conn) throw new Error('fake-smsc: no connection bound as receiver or transceiver');
    const stat = opts.stat ?? 'DELIVRD';
    const err = opts.err ?? '000';
    const format = opts.format ?? 'both';
    const now = new Date();
    const delivered = stat === 'DELIVRD' ? '001' : '000';
    const excerpt = (about?.text ?? '').replace(/[^ -~]/g, '.').slice(0, 20);
    const text = `id:${messageId} sub:001 dlvrd:${delivered} submit date:${yymmddhhmm(now)} done date:${yymmddhhmm(opts.doneDate ?? now)} stat:${stat} err:${err} text:${excerpt}`;
    const params: Record<string, unknown> = {
      source_addr_ton: about?.destTon ?? 1,
      source_addr_npi: about?.destNpi ?? 1,
      source_addr: about?.destinationAddr ?? '',
      dest_addr_ton: about?.sourceTon ?? 0,
      dest_addr_npi: about?.sourceNpi ?? 0,
      destination_addr: about?.sourceAddr ?? '',
      esm_class: 0x04, // SMSC delivery receipt
      data_coding: 0,
      short_message: format === 'tlv' ? Buffer.alloc(0) : text,
    };
    if (format !== 'text') {
      params.receipted_message_id = messageId;
      params.message_state = MESSAGE_STATE[stat];
      if (err !== '000')
        params.network_error_code = Buffer.from([0x03, ...[Number(err) >> 8, Number(err) & 0xff]]); // 3 = GSM
    }
    const status = await this.deliverSm(params, conn);
    this.deliverResponses.push({ messageId, status });
    return status;
  }

  /**
   * Sends any deliver_sm (a mobile-originated message, a malformed receipt) to a receiving
   * connection; resolves with the client's deliver_sm_resp command_status.
   */
  async deliverSm(params: Record<string, unknown>, conn = this.receivingConn()): Promise<number> {
    if (!conn) throw new Error('fake-smsc: no connection bound as receiver or transceiver');
    const resp = await this.request(conn, new smpp.PDU('deliver_sm', params));
    if (!resp) throw new Error('fake-smsc: no deliver_sm_resp');
    return resp.command_status;
  }

  /**
   * Delivers a mobile-originated message (SMPP v3.4 4.6.1: deliver_sm with esm_class message type
   * 0, the phone as source_addr, our number as destination_addr) to a receiving connection;
   * resolves with the client's deliver_sm_resp command_status. Rejects when there is no bound
   * receiver or no answer within 2 s.
   */
  async sendMo(mo: MobileOriginated): Promise<number> {
    const digits = (n: string) => n.replace(/^\+/, '');
    const numeric = /^\+?\d+$/.test(mo.to);
    return this.deliverSm({
      source_addr_ton: mo.sourceTon ?? 1,
      source_addr_npi: 1,
      source_addr: digits(mo.from),
      dest_addr_ton: numeric ? (digits(mo.to).length <= 6 ? 3 : 1) : 5, // network-specific for a short code
      dest_addr_npi: numeric ? 1 : 0,
      destination_addr: numeric ? digits(mo.to) : mo.to,
      esm_class: mo.esmClass ?? 0x00,
      data_coding: mo.ucs2 ? 0x08 : 0x00,
      short_message: mo.text,
    });
  }

  /** Polls `cond` until true; rejects after `ms`. */
  async waitFor(cond: () => boolean, ms = 5_000, what = 'condition'): Promise<void> {
    const until = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > until) throw new Error(`fake-smsc: timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private receivingConn(prefer?: number): Conn | undefined {
    const rx = [...this.conns].filter((c) => c.bound === 'transceiver' || c.bound === 'receiver');
    return rx.find((c) => c.id === prefer && c.bound === 'transceiver') ?? rx[0];
  }

  private request(c: Conn, pdu: PDU, ms = 2_000): Promise<PDU | null> {
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(null), ms);
      const sent = c.session.send(pdu, (resp) => {
        clearTimeout(t);
        resolve(resp);
      });
      if (!sent) {
        clearTimeout(t);
        resolve(null);
      }
    });
  }

  private onSession(session: Session): void {
    const conn: Conn = { id: this.nextConn++, session, bound: null, lastRaw: null };
    this.conns.add(conn);
    // node-smpp reads each PDU as a 4-octet length then the rest; keeping both gives the raw PDU,
    // which its decoded form (text already converted) does not.
    const sock = session.socket as Socket & { read(n?: number): Buffer | null };
    const read = sock.read.bind(sock);
    let head: Buffer | null = null;
    sock.read = ((n?: number) => {
      const b = read(n);
      if (b && n === 4) head = b;
      else if (b && head) {
        conn.lastRaw = Buffer.concat([head, b]);
        head = null;
      }
      return b;
    }) as typeof sock.read;
    session.on('error', () => {}); // a client vanishing is what some tests do
    session.on('close', () => this.conns.delete(conn));
    session.on('pdu', (pdu: PDU) => {
      this.received.push({
        connection: conn.id,
        command: pdu.command,
        commandStatus: pdu.command_status,
        sequenceNumber: pdu.sequence_number,
        raw: conn.lastRaw ?? Buffer.alloc(0),
        pdu,
      });
    });
    for (const cmd of ['bind_transceiver', 'bind_transmitter', 'bind_receiver'] as const)
      session.on(cmd, (pdu: PDU) => this.onBind(conn, cmd, pdu));
    session.on('submit_sm', (pdu: PDU) => this.onSubmit(conn, pdu));
    session.on('enquire_link', (pdu: PDU) => {
      if (!this.ignoreEnquireLink) session.send(pdu.response());
    });
    session.on('unbind', (pdu: PDU) => {
      conn.bound = null;
      session.send(pdu.response(), () => session.close());
    });
    session.on('unknown', (pdu: PDU) => session.send(pdu.response()));
  }

  private onBind(conn: Conn, cmd: keyof typeof BIND_MODE, pdu: PDU): void {
    const str = (v: unknown) => (typeof v === 'string' ? v : '');
    const systemId = str(pdu.system_id);
    const password = str(pdu.password);
    let status: number = ESME.ROK;
    if (this.refuseStatus !== null && Date.now() < this.refuseUntil) status = this.refuseStatus;
    else if (conn.bound) status = ESME.RALYBND;
    else if (systemId !== this.systemId) status = ESME.RINVSYSID;
    else if (password !== this.password) status = ESME.RINVPASWD;
    this.binds.push({
      connection: conn.id,
      command: cmd,
      systemId,
      password,
      systemType: str(pdu.system_type),
      interfaceVersion: typeof pdu.interface_version === 'number' ? pdu.interface_version : -1,
      status,
    });
    if (status !== ESME.ROK) {
      // As most SMSCs do after a refused bind: answer, then hang up.
      conn.session.send(pdu.response({ command_status: status }), () => conn.session.close());
      return;
    }
    conn.bound = BIND_MODE[cmd];
    conn.session.send(pdu.response({ system_id: 'FAKESMSC' }));
  }

  private onSubmit(conn: Conn, pdu: PDU): void {
    const shortMessage = conn.lastRaw
      ? Buffer.from(rawShortMessage(conn.lastRaw))
      : Buffer.alloc(0);
    const num = (v: unknown) => (typeof v === 'number' ? v : 0);
    const str = (v: unknown) => (typeof v === 'string' ? v : '');
    const esmClass = num(pdu.esm_class);
    const udh =
      esmClass & 0x40 && shortMessage.length > 0
        ? shortMessage.subarray(0, shortMessage[0]! + 1)
        : null;
    const decoded = pdu.short_message as { message?: unknown } | undefined;
    const submit: ReceivedSubmit = {
      connection: conn.id,
      serviceType: str(pdu.service_type),
      sourceTon: num(pdu.source_addr_ton),
      sourceNpi: num(pdu.source_addr_npi),
      sourceAddr: str(pdu.source_addr),
      destTon: num(pdu.dest_addr_ton),
      destNpi: num(pdu.dest_addr_npi),
      destinationAddr: str(pdu.destination_addr),
      esmClass,
      registeredDelivery: num(pdu.registered_delivery),
      dataCoding: num(pdu.data_coding),
      shortMessage,
      udh,
      payload: udh ? shortMessage.subarray(udh.length) : shortMessage,
      text: typeof decoded?.message === 'string' ? decoded.message : '',
      messageId: null,
      status: null,
    };
    this.submits.push(submit);
    if (conn.bound !== 'transceiver' && conn.bound !== 'transmitter') {
      submit.status = ESME.RINVBNDSTS;
      conn.session.send(pdu.response({ command_status: ESME.RINVBNDSTS }));
      return;
    }
    if (this.stallSubmits) {
      this.stalled.push({ conn, pdu, submit });
      return;
    }
    this.answerSubmit(conn, pdu, submit);
  }

  private answerSubmit(conn: Conn, pdu: PDU, submit: ReceivedSubmit): void {
    const knob =
      typeof this.submitStatus === 'function' ? this.submitStatus(submit) : this.submitStatus;
    const status = knob ?? statusForDestination(submit.destinationAddr) ?? ESME.ROK;
    submit.status = status;
    if (status !== ESME.ROK) {
      conn.session.send(pdu.response({ command_status: status }));
      return;
    }
    const messageId = (this.nextId++).toString(16);
    submit.messageId = messageId;
    conn.session.send(pdu.response({ message_id: messageId }));
    if (this.receipts.send && (submit.registeredDelivery & 0x03) !== 0) {
      const r = { ...this.receipts };
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.sendReceipt(messageId, { stat: r.stat, err: r.err, format: r.format }, submit).catch(
          () => {},
        );
      }, r.delayMs);
      this.timers.add(t);
    }
  }
}
