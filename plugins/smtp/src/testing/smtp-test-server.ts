/**
 * A real SMTP relay for tests: a child process running smtp-server (see
 * smtp-test-server-child.mjs) that speaks SMTP on 127.0.0.1, checks AUTH PLAIN/LOGIN, can offer
 * STARTTLS with the throw-away certificate of test-tls.ts, and hands every accepted message back
 * parsed by mailparser. It runs in its own process so that a stalled or refusing server really is
 * another peer on the network, not a callback in the test's event loop.
 *
 * What it answers (by the recipient's local part, so one server covers every case):
 *   - `data-NNN@…`     accepted at RCPT TO, refused with reply NNN after DATA (e.g. data-554)
 *   - `<word>-NNN@…`   refused at RCPT TO with reply NNN (reject-550, defer-451, full-452, limit-552,
 *                      throttle-454 with Amazon SES's "Throttling failure: Maximum sending rate exceeded.")
 *   - `<word>-NNN-X.Y.Z@…` refused at RCPT TO with reply NNN and enhanced status X.Y.Z (nomx-550-5.1.10)
 *   - anything else    accepted: "250 2.0.0 Ok: queued as …"
 * and, by knob, at connect: a 421 instead of the greeting, or no greeting at all.
 *
 * References: RFC 5321 https://www.rfc-editor.org/rfc/rfc5321 (reply codes, 4.5.3.1.10 on 552), RFC
 * 3463 https://www.rfc-editor.org/rfc/rfc3463 (enhanced status codes), RFC 4954
 * https://www.rfc-editor.org/rfc/rfc4954 (AUTH, 535 5.7.8), RFC 3207
 * https://www.rfc-editor.org/rfc/rfc3207 (STARTTLS), smtp-server
 * https://nodemailer.com/extras/smtp-server/, mailparser https://nodemailer.com/extras/mailparser/.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { TEST_SERVER_CERT_PEM, TEST_SERVER_KEY_PEM } from './test-tls.ts';

export { TEST_CA_PEM } from './test-tls.ts';
/**
 * The test certificate (127.0.0.1, localhost) and its key, for other test servers that offer
 * STARTTLS.
 */
export { TEST_SERVER_CERT_PEM, TEST_SERVER_KEY_PEM } from './test-tls.ts';

export interface SmtpTestServerOptions {
  /** Accounts for AUTH PLAIN/LOGIN, user → password. */
  users?: Record<string, string>;
  /**
   * Offer STARTTLS (with the test certificate); off, the server hides it and allows AUTH in clear.
   * Default true.
   */
  starttls?: boolean;
  /** Accept mail without AUTH. Default false. */
  authOptional?: boolean;
  /** SIZE limit the server advertises, bytes. */
  size?: number;
}

export interface ReceivedAttachment {
  contentType: string;
  /** As in the header, with angle brackets: `<logo>`. */
  contentId: string | null;
  /** Without brackets, as an html `cid:` reference names it. */
  cid: string | null;
  filename: string | null;
  contentDisposition: string;
  /** True when the part sat inside a multipart/related (beside the html). */
  related: boolean;
  content: Buffer;
}

export interface ReceivedAddress {
  address: string;
  name: string;
}

export interface ReceivedMessage {
  envelope: { mailFrom: string; rcptTo: string[] };
  /** The AUTH user of the session that sent it, null when it sent without AUTH. */
  user: string | null;
  /** Whether the session ran over TLS (after STARTTLS). */
  secure: boolean;
  /** The message exactly as received after DATA (for DKIM verification). */
  raw: Buffer;
  messageId: string | null;
  subject: string | null;
  from: ReceivedAddress[];
  to: ReceivedAddress[];
  replyTo: ReceivedAddress[];
  /** Lower-case header name → first value, unfolded. */
  headers: Record<string, string>;
  text: string | null;
  html: string | null;
  attachments: ReceivedAttachment[];
}

export interface AuthAttempt {
  method: string;
  user: string | null;
  ok: boolean;
}

export interface Rejection {
  stage: 'rcpt' | 'data';
  address: string;
  code: number;
}

export interface Knobs {
  /** 'ok' greets with 220; '421' refuses the connection; 'silent' accepts it and never greets. */
  greeting: 'ok' | '421' | 'silent';
}

type RawMessage = Omit<ReceivedMessage, 'raw' | 'attachments'> & {
  raw: string;
  attachments: (Omit<ReceivedAttachment, 'content'> & { content: string })[];
};

type ChildMessage =
  | { type: 'listening'; host: string; port: number }
  | { type: 'message'; message: RawMessage }
  | { type: 'auth'; method: string; user: string | null; ok: boolean }
  | { type: 'rejected'; stage: 'rcpt' | 'data'; address: string; code: number }
  | { type: 'ack'; id: number }
  | { type: 'closed' }
  | { type: 'server-error'; message: string };

/**
 * The child script sits next to this file in src/testing. Bundled (dist/testing.js,
 * dist/conformance.js) this module's URL is under dist/, and the script is not part of the
 * bundle, so the source copy is found through the package root instead.
 */
function childScript(): string {
  const candidates = [
    './smtp-test-server-child.mjs',
    '../src/testing/smtp-test-server-child.mjs',
    '../../src/testing/smtp-test-server-child.mjs',
  ].map((rel) => new URL(rel, import.meta.url));
  for (const c of candidates) {
    const p = fileURLToPath(c);
    if (existsSync(p)) return p;
  }
  throw new Error(
    `smtp-test-server: cannot find smtp-test-server-child.mjs (looked at ${candidates.map((c) => fileURLToPath(c)).join(', ')})`,
  );
}

export class SmtpTestServer {
  readonly received: ReceivedMessage[] = [];
  readonly authAttempts: AuthAttempt[] = [];
  readonly rejections: Rejection[] = [];
  /** SMTP sessions that have ended (QUIT, a drop by either side). */
  sessionsClosed = 0;
  host = '127.0.0.1';
  port = 0;

  private child: ChildProcess | undefined;
  private nextId = 1;
  private readonly acks = new Map<number, () => void>();
  private readonly waiters = new Set<() => void>();

  constructor(private readonly options: SmtpTestServerOptions = {}) {}

  /** Starts the server process; a second call returns the running server's address. */
  async start(): Promise<{ host: string; port: number }> {
    if (this.child && this.port !== 0) return { host: this.host, port: this.port };
    const starttls = this.options.starttls ?? true;
    const args = JSON.stringify({
      users: this.options.users ?? {},
      starttls,
      authOptional: this.options.authOptional ?? false,
      size: this.options.size,
      ...(starttls ? { key: TEST_SERVER_KEY_PEM, cert: TEST_SERVER_CERT_PEM } : {}),
    });
    // execArgv: [] because the child is plain JavaScript: the test runner's loader flags are not
    // needed.
    const child = fork(childScript(), [args], {
      execArgv: [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child = child;
    child.on('message', (m) => this.onChildMessage(m as ChildMessage));
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`smtp-test-server: the server process exited (${code}) before listening`));
      child.once('exit', onExit);
      child.once('error', reject);
      const onListening = (m: unknown) => {
        const msg = m as ChildMessage;
        if (msg.type !== 'listening') return;
        child.off('message', onListening);
        child.off('exit', onExit);
        this.host = msg.host;
        this.port = msg.port;
        resolve({ host: msg.host, port: msg.port });
      };
      child.on('message', onListening);
    });
  }

  /** Changes how the server answers new connections; resolves once the server process has it. */
  set(knobs: Partial<Knobs>): Promise<void> {
    const child = this.child;
    if (!child?.connected) return Promise.reject(new Error('smtp-test-server: not started'));
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.acks.set(id, resolve);
      child.send({ type: 'set', id, knobs });
    });
  }

  /** Resolves with the first received message that matches (already received ones count). */
  async waitForMessage(
    match: (m: ReceivedMessage) => boolean = () => true,
    timeoutMs = 5_000,
  ): Promise<ReceivedMessage> {
    let found: ReceivedMessage | undefined;
    await this.waitUntil(
      () => {
        found = this.received.find(match);
        return found !== undefined;
      },
      timeoutMs,
      () => `no matching message (received ${this.received.length})`,
    );
    return found!;
  }

  /**
   * Resolves once `check` holds, re-checking after every report from the server process (a
   * message, an AUTH attempt, a refusal). Reports travel over IPC, so one can land a moment after
   * the SMTP reply the client already acted on: wait for it rather than read the lists at once.
   */
  waitUntil(
    check: () => boolean,
    timeoutMs = 5_000,
    what: () => string = () => 'condition not met',
  ): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = () => {
        if (!check()) return;
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`smtp-test-server: ${what()} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.connected) child.send({ type: 'stop' });
    else child.kill();
    const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
    await exited;
    clearTimeout(timer);
  }

  private onChildMessage(msg: ChildMessage): void {
    this.record(msg);
    for (const w of [...this.waiters]) w();
  }

  private record(msg: ChildMessage): void {
    switch (msg.type) {
      case 'message': {
        const m = msg.message;
        this.received.push({
          ...m,
          raw: Buffer.from(m.raw, 'base64'),
          attachments: m.attachments.map((a) => ({
            ...a,
            content: Buffer.from(a.content, 'base64'),
          })),
        });
        break;
      }
      case 'auth':
        this.authAttempts.push({ method: msg.method, user: msg.user, ok: msg.ok });
        break;
      case 'rejected':
        this.rejections.push({ stage: msg.stage, address: msg.address, code: msg.code });
        break;
      case 'ack': {
        const done = this.acks.get(msg.id);
        this.acks.delete(msg.id);
        done?.();
        break;
      }
      case 'closed':
        this.sessionsClosed++;
        break;
      case 'server-error':
        process.emitWarning(`smtp-test-server: ${msg.message}`);
        break;
      case 'listening':
        break;
    }
  }
}

/** Creates and starts a test server. */
export async function startSmtpTestServer(
  options: SmtpTestServerOptions = {},
): Promise<SmtpTestServer> {
  const s = new SmtpTestServer(options);
  await s.start();
  return s;
}
