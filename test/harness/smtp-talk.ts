import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

/**
 * A bare SMTP client for tests that need every reply as the server sent it (RFC 5321): the
 * greeting, each command's code and text, the answer after DATA. nodemailer hides most of that
 * (it stops at the first refused recipient, folds replies into errors); this speaks the protocol
 * line by line, so a test can assert a 421 at connect, a 550 at RCPT TO or a 552 after DATA.
 */

export interface SmtpReply {
  code: number;
  /** The reply's lines joined with a space, codes and hyphens removed. */
  text: string;
}

/** A reply code of 0: the server closed the connection instead of answering. */
export const CLOSED: SmtpReply = { code: 0, text: 'connection closed' };

export class SmtpTalk {
  #socket: Socket;
  #buffer = '';
  #waiting: ((r: SmtpReply) => void) | null = null;
  #replies: SmtpReply[] = [];
  #closed = false;
  greeting: SmtpReply = CLOSED;

  private constructor(socket: Socket) {
    this.#socket = socket;
    this.#attach(socket);
  }

  #attach(socket: Socket): void {
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => this.#onData(d));
    socket.on('close', () => {
      this.#closed = true;
      this.#deliver(CLOSED);
    });
    socket.on('error', () => {});
  }

  /**
   * Connects and reads the greeting (a refused connection's 421 is a greeting too). `from` is the
   * local address to connect from (another loopback address, 127.0.0.2…, is another peer).
   */
  static async open(
    port: number,
    o: { host?: string; from?: string; timeoutMs?: number } = {},
  ): Promise<SmtpTalk> {
    const socket = connect({
      port,
      host: o.host ?? '127.0.0.1',
      ...(o.from ? { localAddress: o.from } : {}),
    });
    const timeoutMs = o.timeoutMs ?? 10_000;
    socket.setTimeout(timeoutMs, () => socket.destroy());
    const talk = new SmtpTalk(socket);
    talk.greeting = await talk.#next();
    return talk;
  }

  get closed(): boolean {
    return this.#closed;
  }

  #onData(d: string): void {
    this.#buffer += d;
    for (;;) {
      // A reply ends with a line whose code is followed by a space (or nothing).
      const m = /^(?:\d{3}-[^\n]*\n)*(\d{3})(?: [^\n]*)?\r?\n/.exec(this.#buffer);
      if (!m) return;
      const lines = m[0].split(/\r?\n/).filter(Boolean);
      this.#buffer = this.#buffer.slice(m[0].length);
      this.#deliver({
        code: Number(m[1]),
        text: lines
          .map((l) => l.slice(4))
          .join(' ')
          .trim(),
      });
    }
  }

  #deliver(r: SmtpReply): void {
    const w = this.#waiting;
    if (w) {
      this.#waiting = null;
      w(r);
    } else if (r !== CLOSED || this.#replies.length === 0) this.#replies.push(r);
  }

  #next(): Promise<SmtpReply> {
    const r = this.#replies.shift();
    if (r) return Promise.resolve(r);
    if (this.#closed) return Promise.resolve(CLOSED);
    return new Promise((resolve) => (this.#waiting = resolve));
  }

  /** Sends one command line and reads its reply. */
  async command(line: string): Promise<SmtpReply> {
    if (this.#closed) return CLOSED;
    this.#socket.write(`${line}\r\n`);
    return this.#next();
  }

  /** STARTTLS, then the TLS handshake (trusting `ca`); resolves with the STARTTLS reply. */
  async startTls(ca: string, servername = 'localhost'): Promise<SmtpReply> {
    const r = await this.command('STARTTLS');
    if (r.code !== 220) return r;
    const plain = this.#socket;
    plain.removeAllListeners('data');
    plain.removeAllListeners('close');
    const secure = tlsConnect({ socket: plain, ca, servername });
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', resolve);
      secure.once('error', reject);
    });
    this.#socket = secure;
    this.#attach(secure);
    return r;
  }

  /**
   * DATA, the message (line ends made CRLF, dot-stuffed), and the final reply; the 354 when DATA is
   * refused.
   */
  async data(message: Buffer | string): Promise<SmtpReply> {
    const go = await this.command('DATA');
    if (go.code !== 354) return go;
    const text = (typeof message === 'string' ? message : message.toString('latin1')).replace(
      /\r?\n/g,
      '\r\n',
    );
    const stuffed = text.replace(/(^|\r\n)\./g, '$1..');
    this.#socket.write(
      Buffer.from(`${stuffed}${stuffed.endsWith('\r\n') ? '' : '\r\n'}.\r\n`, 'latin1'),
    );
    return this.#next();
  }

  /**
   * One whole transaction: EHLO when not said yet, MAIL FROM, RCPT TO each, DATA when one was
   * taken.
   */
  async send(o: {
    from: string;
    to: string[];
    message: Buffer | string;
  }): Promise<{ mail: SmtpReply; rcpt: SmtpReply[]; data: SmtpReply | null }> {
    const mail = await this.command(`MAIL FROM:<${o.from}>`);
    const rcpt: SmtpReply[] = [];
    if (mail.code !== 250) return { mail, rcpt, data: null };
    for (const to of o.to) rcpt.push(await this.command(`RCPT TO:<${to}>`));
    if (!rcpt.some((r) => r.code === 250)) {
      await this.command('RSET');
      return { mail, rcpt, data: null };
    }
    return { mail, rcpt, data: await this.data(o.message) };
  }

  async quit(): Promise<void> {
    if (!this.#closed) await this.command('QUIT');
    this.#socket.destroy();
  }
}

/**
 * Opens a connection (from `peer`, a loopback address, when given), says EHLO, runs one transaction
 * and quits.
 */
export async function sendOnce(
  port: number,
  o: { from: string; to: string[]; message: Buffer | string; peer?: string },
): Promise<{ greeting: SmtpReply; mail: SmtpReply; rcpt: SmtpReply[]; data: SmtpReply | null }> {
  const talk = await SmtpTalk.open(port, { from: o.peer });
  try {
    if (talk.greeting.code !== 220)
      return { greeting: talk.greeting, mail: CLOSED, rcpt: [], data: null };
    await talk.command('EHLO test.client.invalid');
    return { greeting: talk.greeting, ...(await talk.send(o)) };
  } finally {
    await talk.quit();
  }
}
