/**
 * A local stand-in for Twilio's Programmable Messaging REST API and its status callbacks, speaking
 * the wire protocol Twilio documents:
 *   - Message resource (create, 201 body):  https://www.twilio.com/docs/messaging/api/message-resource
 *   - Requests and HTTP Basic auth (Account SID + Auth Token, or API key SID + secret):
 *     https://www.twilio.com/docs/usage/requests-to-twilio
 *   - Error body {code, message, more_info, status}: https://www.twilio.com/docs/usage/twilios-response
 *   - Error codes: https://www.twilio.com/docs/api/errors (20003, 20404, 20429, 21211, 21408,
 *     21602, 21603, 21604, 21610, 21612, 21614, 21617)
 *   - Status callbacks (form-encoded, MessageStatus/ErrorCode):
 *     https://www.twilio.com/docs/messaging/guides/outbound-message-status-in-status-callbacks
 *   - X-Twilio-Signature: https://www.twilio.com/docs/usage/webhooks/webhooks-security
 *   - Incoming-message webhook (form-encoded From/To/Body/MessageSid…, OptOutType with Advanced
 *     Opt-Out): https://www.twilio.com/docs/messaging/guides/webhook-request
 *   - Opt-out keywords (STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT, REVOKE, OPTOUT; START, YES,
 *     UNSTOP): https://www.twilio.com/docs/messaging/tutorials/advanced-opt-out
 *
 * Outcomes by the last four digits of To (a knob or setOutcome() overrides them):
 *   0000 → 400 21211 invalid To          0001 → 400 21610 unsubscribed recipient
 *   0002 → 400 21408 region not enabled  0003 → 400 21614 not a mobile number
 *   0004 → 400 21612 not reachable       0429 → 429 20429 with Retry-After: 7
 *   0500 → 500 20500                     0503 → 503 20503
 * Anything else is accepted: 201 with status "queued" ("accepted" through a Messaging Service).
 *
 * Usage:
 *   const fake = new FakeTwilio();
 *   const baseUrl = await fake.start();            // http://127.0.0.1:<port>
 *   ... plugin config { baseUrl, accountSid: fake.accountSid, authToken: fake.authToken, ... }
 *   fake.knobs.rateLimit = { retryAfter: '3' };   // every send answers 429 until cleared
 *   fake.knobs.maxPerSecond = 50;                 // sends over 50 in any second answer 429
 *   await fake.sendStatus(sid, 'delivered');       // signed POST to the message's StatusCallback
 *   await fake.sendInbound(url, { from: '+15551230000', to: '+15005550006', body: 'STOP' }); // a signed incoming SMS
 *   await fake.stop();
 *
 * As Twilio does, a STOP texted to a number makes later sends from that number (or from the
 * Messaging Service it belongs to) to the texter answer 400 21610, until a START.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  /** Path with query string, as requested. */
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The Basic credentials as sent (null without a Basic Authorization header). */
  auth: { username: string; password: string } | null;
  /** The form fields of a form-encoded body (the last value of a repeated name). */
  form: Record<string, string>;
  rawBody: string;
  at: Date;
}

/** An answer Twilio would give instead of creating the message. */
export interface FakeError {
  status: number;
  code: number;
  message: string;
  /** A Retry-After header value (seconds or an HTTP-date). */
  retryAfter?: string;
}

export interface FakeMessage {
  sid: string;
  accountSid: string;
  to: string;
  from: string | null;
  messagingServiceSid: string | null;
  body: string;
  status: string;
  statusCallback: string | null;
  dateCreated: Date;
}

export interface FakeTwilioKnobs {
  /** Every Messages request answers 429 / 20429 (with Retry-After when given). */
  rateLimit: { retryAfter?: string } | null;
  /** Every Messages request answers this 5xx. */
  serverError: 500 | 503 | null;
  /** Every request is received and recorded but never answered (until stop()). */
  hang: boolean;
  /**
   * Messages accepted in any one second (a sliding window): more answer 429 / 20429 with
   * Retry-After: 1, as an account or sender over its rate would get. Counted in `refusedForRate`.
   */
  maxPerSecond: number | null;
}

export interface FakeTwilioOptions {
  accountSid?: string;
  authToken?: string;
  apiKeySid?: string;
  apiKeySecret?: string;
}

export type MessageStatus =
  | 'queued'
  | 'sending'
  | 'sent'
  | 'delivered'
  | 'undelivered'
  | 'failed'
  | 'read'
  | 'accepted';

/** An SMS a phone texts to one of the account's numbers. */
export interface InboundSms {
  /** The texter, E.164. */
  from: string;
  /** The account's number it was texted to. */
  to: string;
  body: string;
  /** Set when the number belongs to a Messaging Service. */
  messagingServiceSid?: string;
  /** With Advanced Opt-Out: what Twilio made of the keyword. */
  optOutType?: 'STOP' | 'START' | 'HELP';
}

/** Twilio's default opt-out and opt-in keywords: the whole text, any case. */
const STOP_WORDS = new Set([
  'STOP',
  'STOPALL',
  'UNSUBSCRIBE',
  'CANCEL',
  'END',
  'QUIT',
  'REVOKE',
  'OPTOUT',
]);
const START_WORDS = new Set(['START', 'YES', 'UNSTOP']);

const API_VERSION = '2010-04-01';
const hex = (bytes: number) => randomBytes(bytes).toString('hex');
/** Twilio's dates: RFC 2822 in GMT, e.g. "Tue, 27 Nov 2018 16:14:39 +0000". */
const rfc2822 = (d: Date) => d.toUTCString().replace(/GMT$/, '+0000');

const errorBody = (e: { status: number; code: number; message: string }) => ({
  code: e.code,
  message: e.message,
  more_info: `https://www.twilio.com/docs/errors/${e.code}`,
  status: e.status,
});

function byNumber(to: string, from: string | undefined): FakeError | undefined {
  switch (to.slice(-4)) {
    case '0000':
      return {
        status: 400,
        code: 21211,
        message: `The 'To' number ${to} is not a valid phone number.`,
      };
    case '0001':
      return { status: 400, code: 21610, message: 'Attempt to send to unsubscribed recipient' };
    case '0002':
      return {
        status: 400,
        code: 21408,
        message: `Permission to send an SMS has not been enabled for the region indicated by the 'To' number: ${to}.`,
      };
    case '0003':
      return { status: 400, code: 21614, message: "'To' number is not a valid mobile number" };
    case '0004':
      return {
        status: 400,
        code: 21612,
        message: `The 'To' phone number: ${to}, is not currently reachable using the 'From' phone number: ${from ?? 'your Messaging Service'} via SMS.`,
      };
    case '0429':
      return { status: 429, code: 20429, message: 'Too Many Requests', retryAfter: '7' };
    case '0500':
      return { status: 500, code: 20500, message: 'Internal Server Error' };
    case '0503':
      return { status: 503, code: 20503, message: 'Service Unavailable' };
    default:
      return undefined;
  }
}

export class FakeTwilio {
  readonly accountSid: string;
  readonly authToken: string;
  readonly apiKeySid: string;
  readonly apiKeySecret: string;
  /** Every request, in arrival order, recorded before it is answered. */
  readonly received: ReceivedRequest[] = [];
  /** The messages created, by SID. */
  readonly messages = new Map<string, FakeMessage>();
  readonly knobs: FakeTwilioKnobs = {
    rateLimit: null,
    serverError: null,
    hang: false,
    maxPerSecond: null,
  };
  /** Messages refused by the maxPerSecond knob. */
  refusedForRate = 0;
  /** When the messages of the last second were accepted, for maxPerSecond. */
  readonly #acceptedAt: number[] = [];
  /**
   * "sender|texter" pairs a STOP blocks (sender: a number or a Messaging Service SID), as Twilio
   * keeps them.
   */
  readonly optOuts = new Set<string>();
  /** What GET Accounts/{sid}.json reports; Twilio keeps authenticating suspended accounts. */
  accountStatus: 'active' | 'suspended' | 'closed' = 'active';
  readonly #outcomes = new Map<string, FakeError>();
  readonly #server: http.Server;
  #baseUrl: string | undefined;

  constructor(opts: FakeTwilioOptions = {}) {
    this.accountSid = opts.accountSid ?? `AC${hex(16)}`;
    this.authToken = opts.authToken ?? hex(16);
    this.apiKeySid = opts.apiKeySid ?? `SK${hex(16)}`;
    this.apiKeySecret = opts.apiKeySecret ?? hex(16);
    this.#server = http.createServer((req, res) => void this.#handle(req, res));
  }

  /** Listens on 127.0.0.1 on a free port and resolves with the base URL (config `baseUrl`). */
  async start(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = this.#server.address() as AddressInfo;
    this.#baseUrl = `http://127.0.0.1:${port}`;
    return this.#baseUrl;
  }

  get baseUrl(): string {
    if (!this.#baseUrl) throw new Error('FakeTwilio is not started');
    return this.#baseUrl;
  }

  /** Closes the server, cutting hung requests. */
  async stop(): Promise<void> {
    if (!this.#server.listening) return;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closed;
  }

  /** Makes every send to `to` answer with `error` (overrides the number table). */
  setOutcome(to: string, error: FakeError): void {
    this.#outcomes.set(to, error);
  }

  /** Clears received requests, messages, knobs and per-number outcomes. */
  reset(): void {
    this.received.length = 0;
    this.messages.clear();
    this.#outcomes.clear();
    this.optOuts.clear();
    this.knobs.rateLimit = null;
    this.knobs.serverError = null;
    this.knobs.hang = false;
    this.accountStatus = 'active';
  }

  /** Resolves once `count` requests have arrived (for requests the fake leaves hanging). */
  async waitForRequests(count: number, ms = 5_000): Promise<ReceivedRequest[]> {
    const deadline = Date.now() + ms;
    while (this.received.length < count) {
      if (Date.now() > deadline)
        throw new Error(`FakeTwilio: ${this.received.length} of ${count} requests within ${ms} ms`);
      await new Promise((r) => setImmediate(r));
    }
    return this.received;
  }

  /**
   * X-Twilio-Signature for a request to `url` with these POST parameters: base64 HMAC-SHA1 with
   * the Auth Token over the URL followed by each parameter, sorted by name, as name + value.
   */
  sign(url: string, params: Record<string, string>, authToken = this.authToken): string {
    const data = Object.keys(params)
      .sort()
      .reduce((acc, k) => acc + k + params[k], url);
    return createHmac('sha1', authToken).update(Buffer.from(data, 'utf8')).digest('base64');
  }

  /**
   * Posts a status callback (or any webhook) to `url` the way Twilio does: form-encoded, signed
   * with X-Twilio-Signature over exactly this URL. `signWith` signs with another token (a forgery).
   */
  async sendStatusCallback(
    url: string,
    params: Record<string, string>,
    opts: { signWith?: string } = {},
  ): Promise<{ status: number; body: string; headers: Headers }> {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
        'x-twilio-signature': this.sign(url, params, opts.signWith ?? this.authToken),
        'i-twilio-idempotency-token': randomUUID(),
        'user-agent': 'TwilioProxy/1.1',
        accept: '*/*',
      },
      body: new URLSearchParams(params).toString(),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.text(), headers: res.headers };
  }

  /** The parameters Twilio posts when message `sid` reaches `status`. */
  statusParams(
    sid: string,
    status: MessageStatus,
    opts: { errorCode?: number } = {},
  ): Record<string, string> {
    const m = this.messages.get(sid);
    if (!m) throw new Error(`FakeTwilio: no message ${sid}`);
    const p: Record<string, string> = {
      ApiVersion: API_VERSION,
      AccountSid: m.accountSid,
      MessageSid: m.sid,
      SmsSid: m.sid,
      MessageStatus: status,
      SmsStatus: status,
      To: m.to,
      // A Messaging Service has picked a sender by the time it reports.
      From: m.from ?? '+15005550006',
    };
    if (m.messagingServiceSid) p.MessagingServiceSid = m.messagingServiceSid;
    if (status === 'failed' || status === 'undelivered')
      p.ErrorCode = String(opts.errorCode ?? 30003);
    if (status === 'delivered' || status === 'undelivered') {
      const d = new Date();
      const two = (n: number) => String(n).padStart(2, '0');
      p.RawDlrDoneDate = `${two(d.getUTCFullYear() % 100)}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}`;
    }
    return p;
  }

  /**
   * The parameters Twilio posts to a number's incoming-message webhook: the message, its sender
   * and number with their geography (empty here, as Twilio leaves what it does not know), and
   * OptOutType when Advanced Opt-Out recognised a keyword.
   */
  inboundParams(sms: InboundSms): Record<string, string> {
    const sid = `SM${hex(16)}`;
    const p: Record<string, string> = {
      ToCountry: 'US',
      ToState: '',
      SmsMessageSid: sid,
      NumMedia: '0',
      ToCity: '',
      FromZip: '',
      SmsSid: sid,
      FromState: '',
      SmsStatus: 'received',
      FromCity: '',
      Body: sms.body,
      FromCountry: 'US',
      To: sms.to,
      ToZip: '',
      NumSegments: '1',
      MessageSid: sid,
      AccountSid: this.accountSid,
      From: sms.from,
      ApiVersion: API_VERSION,
    };
    if (sms.messagingServiceSid) p.MessagingServiceSid = sms.messagingServiceSid;
    if (sms.optOutType) p.OptOutType = sms.optOutType;
    return p;
  }

  /**
   * Posts an incoming SMS to `url` the way Twilio calls a number's webhook (form-encoded, signed
   * over exactly this URL; `signWith` signs with another token, a forgery), and applies its
   * keyword to the fake's own opt-out list as Twilio does.
   */
  async sendInbound(
    url: string,
    sms: InboundSms,
    opts: { signWith?: string } = {},
  ): Promise<{ status: number; body: string; headers: Headers }> {
    const params = this.inboundParams(sms);
    const word = sms.body.trim().toUpperCase();
    const stop =
      sms.optOutType === 'STOP' || (sms.optOutType === undefined && STOP_WORDS.has(word));
    const start =
      sms.optOutType === 'START' || (sms.optOutType === undefined && START_WORDS.has(word));
    for (const sender of [sms.to, sms.messagingServiceSid]) {
      if (!sender) continue;
      if (stop) this.optOuts.add(`${sender}|${sms.from}`);
      if (start) this.optOuts.delete(`${sender}|${sms.from}`);
    }
    return this.sendStatusCallback(url, params, opts);
  }

  /**
   * Moves message `sid` to `status` and posts the signed callback to its StatusCallback (or `url`).
   */
  async sendStatus(
    sid: string,
    status: MessageStatus,
    opts: { errorCode?: number; url?: string } = {},
  ): Promise<{ status: number; body: string; headers: Headers }> {
    const m = this.messages.get(sid);
    if (!m) throw new Error(`FakeTwilio: no message ${sid}`);
    const url = opts.url ?? m.statusCallback;
    if (!url)
      throw new Error(
        `FakeTwilio: message ${sid} was sent without a StatusCallback; pass opts.url`,
      );
    m.status = status;
    return this.sendStatusCallback(url, this.statusParams(sid, status, opts));
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    const isForm = (req.headers['content-type'] ?? '').startsWith(
      'application/x-www-form-urlencoded',
    );
    const form: Record<string, string> = isForm
      ? Object.fromEntries(new URLSearchParams(rawBody))
      : {};
    const auth = parseBasic(req.headers.authorization);
    this.received.push({
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      auth,
      form,
      rawBody,
      at: new Date(),
    });
    if (this.knobs.hang) return; // left open; stop() cuts it

    const send = (status: number, body: object, headers: Record<string, string> = {}) => {
      res.writeHead(status, {
        'content-type': 'application/json;charset=utf-8',
        'twilio-request-id': `RQ${hex(16)}`,
        ...headers,
      });
      res.end(JSON.stringify(body));
    };
    const fail = (e: FakeError) =>
      send(
        e.status,
        errorBody(e),
        e.retryAfter !== undefined ? { 'retry-after': e.retryAfter } : {},
      );

    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const m = /^\/2010-04-01\/Accounts\/([^/]+?)(\/Messages)?\.json$/.exec(path);
    // Twilio checks credentials before it looks at the resource.
    const authenticated =
      auth !== null &&
      ((auth.username === this.accountSid && auth.password === this.authToken) ||
        (auth.username === this.apiKeySid && auth.password === this.apiKeySecret));
    if (!authenticated || (m && m[1] !== this.accountSid)) {
      send(401, errorBody({ status: 401, code: 20003, message: 'Authenticate' }), {
        'www-authenticate': 'Basic realm="Twilio API"',
      });
      return;
    }
    if (!m) {
      fail({ status: 404, code: 20404, message: `The requested resource ${path} was not found` });
      return;
    }
    if (!m[2]) {
      if (req.method !== 'GET')
        return fail({ status: 405, code: 20004, message: 'Method not allowed' });
      const created = rfc2822(new Date(Date.UTC(2024, 0, 2, 3, 4, 5)));
      send(200, {
        sid: this.accountSid,
        owner_account_sid: this.accountSid,
        friendly_name: 'ENS fake account',
        status: this.accountStatus,
        type: 'Full',
        date_created: created,
        date_updated: created,
        uri: `/${API_VERSION}/Accounts/${this.accountSid}.json`,
        subresource_uris: { messages: `/${API_VERSION}/Accounts/${this.accountSid}/Messages.json` },
      });
      return;
    }
    if (req.method !== 'POST')
      return fail({ status: 405, code: 20004, message: 'Method not allowed' });

    if (this.knobs.rateLimit)
      return fail({
        status: 429,
        code: 20429,
        message: 'Too Many Requests',
        retryAfter: this.knobs.rateLimit.retryAfter,
      });
    if (this.knobs.serverError) {
      const s = this.knobs.serverError;
      return fail({
        status: s,
        code: s === 500 ? 20500 : 20503,
        message: s === 500 ? 'Internal Server Error' : 'Service Unavailable',
      });
    }
    const to = form.To;
    const from = form.From;
    const serviceSid = form.MessagingServiceSid;
    if (!to) return fail({ status: 400, code: 21604, message: "A 'To' phone number is required." });
    if (!from && !serviceSid)
      return fail({ status: 400, code: 21603, message: "A 'From' phone number is required." });
    if (!form.Body && !form.MediaUrl && !form.ContentSid)
      return fail({ status: 400, code: 21602, message: 'Message body is required.' });
    if ((form.Body ?? '').length > 1600)
      return fail({
        status: 400,
        code: 21617,
        message: 'The concatenated message body exceeds the 1600 character limit.',
      });
    const optedOut =
      (from && this.optOuts.has(`${from}|${to}`)) ||
      (serviceSid && this.optOuts.has(`${serviceSid}|${to}`));
    const outcome =
      this.#outcomes.get(to) ??
      (optedOut
        ? { status: 400, code: 21610, message: 'Attempt to send to unsubscribed recipient' }
        : byNumber(to, from));
    if (outcome) return fail(outcome);
    if (this.knobs.maxPerSecond !== null) {
      const now = performance.now();
      while (this.#acceptedAt.length > 0 && this.#acceptedAt[0]! <= now - 1000)
        this.#acceptedAt.shift();
      if (this.#acceptedAt.length >= this.knobs.maxPerSecond) {
        this.refusedForRate++;
        return fail({ status: 429, code: 20429, message: 'Too Many Requests', retryAfter: '1' });
      }
      this.#acceptedAt.push(now);
    }

    const now = new Date();
    const msg: FakeMessage = {
      sid: `SM${hex(16)}`,
      accountSid: this.accountSid,
      to,
      from: from ?? null,
      messagingServiceSid: serviceSid ?? null,
      body: form.Body ?? '',
      status: from ? 'queued' : 'accepted',
      statusCallback: form.StatusCallback ?? null,
      dateCreated: now,
    };
    this.messages.set(msg.sid, msg);
    const uri = `/${API_VERSION}/Accounts/${this.accountSid}/Messages/${msg.sid}`;
    const segments = Math.max(1, Math.ceil(msg.body.length / 160));
    send(201, {
      account_sid: this.accountSid,
      api_version: API_VERSION,
      body: msg.body,
      date_created: rfc2822(now),
      date_sent: null,
      date_updated: rfc2822(now),
      direction: 'outbound-api',
      error_code: null,
      error_message: null,
      from: msg.from,
      messaging_service_sid: msg.messagingServiceSid,
      // A Messaging Service has not picked a sender yet, so Twilio reports 0 segments.
      num_media: '0',
      num_segments: msg.from ? String(segments) : '0',
      price: null,
      price_unit: 'USD',
      sid: msg.sid,
      status: msg.status,
      subresource_uris: { media: `${uri}/Media.json`, feedback: `${uri}/Feedback.json` },
      to: msg.to,
      uri: `${uri}.json`,
    });
  }
}

function parseBasic(header: string | undefined): { username: string; password: string } | null {
  const m = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  return i < 0 ? null : { username: decoded.slice(0, i), password: decoded.slice(i + 1) };
}
