/**
 * A local push service speaking the Web Push protocol, for tests and for ENS's end-to-end suite.
 *
 * What it follows:
 * - RFC 8030 (Generic Event Delivery Using HTTP Push) https://datatracker.ietf.org/doc/html/rfc8030
 *   §5: a push message is a POST to the subscription's push resource; 201 Created with a Location
 *   header naming the push message resource. §5.2: TTL is required (400 without it); a service may
 *   answer with the TTL it keeps. §5.3 Urgency. §7.2: at least 4096 octets of payload, 413 above.
 *   §7.3: an expired subscription is 404. §8.4: 429 Too Many Requests with Retry-After.
 * - RFC 8291 (Message Encryption for Web Push) https://datatracker.ietf.org/doc/html/rfc8291
 *   Content-Encoding: aes128gcm, one record, keyid = the application server's 65-octet public key.
 *   The fake holds the user agent's private key and auth secret, so it decrypts what it received.
 * - RFC 8292 (VAPID) https://datatracker.ietf.org/doc/html/rfc8292
 *   `Authorization: vapid t=<JWT>, k=<public key>`; ES256 signature checked with k; aud = the push
 *   resource's origin; exp in the future and at most 24 h ahead; sub present. §4.2: a subscription
 *   restricted to an applicationServerKey refuses any other key; 401 when authentication is absent,
 *   403 when it is invalid.
 * - Error bodies take the shape of Mozilla's push service (autopush):
 *   https://mozilla-services.github.io/autopush-rs/errors.html —
 *   {"code", "errno", "error", "message", "more_info"}; errno 102 invalid token (404), 104 payload
 *   too large (413), 106 no such subscription (410), 109 invalid authentication, 110 invalid
 *   encryption (400), 111 missing TTL (400).
 */
import { createECDH, createPublicKey, randomBytes, verify, type ECDH } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import ece from 'http_ece';

const MORE_INFO = 'http://autopush.readthedocs.io/en/latest/http.html#error-codes';
/**
 * RFC 8030 §7.2: the smallest payload limit a push service may have, in octets of encrypted body.
 */
export const MAX_BODY_OCTETS = 4096;
const MAX_VAPID_LIFETIME_S = 24 * 60 * 60;

/** A browser-made subscription registered with the fake. */
export interface FakeSubscription {
  /** The fake's id for it: the last path segment of the endpoint, and the key for knobs. */
  id: string;
  endpoint: string;
  /** What `PushSubscription.toJSON()` gives in a browser: pass it as `device.subscription`. */
  json: { endpoint: string; keys: { p256dh: string; auth: string } };
  /** The VAPID public key the subscription is restricted to (RFC 8292 §4), or null for none. */
  applicationServerKey: string | null;
}

interface Registered extends FakeSubscription {
  ecdh: ECDH;
  auth: Buffer;
  unsubscribed: boolean;
}

/** An answer forced for one subscription until cleared. */
export type Outcome =
  | { status: 404 | 410 | 413 | 500 | 502 | 503 }
  | { status: 429; retryAfter?: string }
  /**
   * Accepts, with a Location given as a path only, or none at all (RFC 8030 requires one; not every
   * service sends it).
   */
  | { status: 201; location: 'relative' | 'none' }
  | { status: 'hang' };

export interface VapidSeen {
  jwtHeader: Record<string, unknown>;
  claims: { aud?: unknown; exp?: unknown; sub?: unknown };
  /** The k parameter: the application server's public key, base64url. */
  publicKey: string;
}

export interface ReceivedPush {
  subscriptionId: string;
  path: string;
  /** Lower-case header names, as Node gives them. */
  headers: IncomingHttpHeaders;
  ttl: string | undefined;
  urgency: string | undefined;
  topic: string | undefined;
  /** The parsed VAPID authorization, when the header was well formed. */
  vapid: VapidSeen | null;
  body: Buffer;
  /** The decrypted payload (UTF-8), when decryption with the subscription's keys succeeded. */
  plaintext: string | null;
  decryptError: string | null;
  /** What the fake answered; 0 while a hung request is held. */
  status: number;
  /**
   * The Location the fake answered an accepted message with (absolute unless a knob says
   * otherwise).
   */
  location: string | null;
}

const b64u = (b: Buffer): string => b.toString('base64url');

export class FakePushService {
  readonly received: ReceivedPush[] = [];
  #server: Server | null = null;
  #base = '';
  readonly #subs = new Map<string, Registered>();
  readonly #outcomes = new Map<string, Outcome>();
  readonly #waiters = new Set<() => void>();

  /** Starts listening on 127.0.0.1 (a free port); resolves with the base URL (its origin). */
  async start(): Promise<string> {
    if (this.#server) return this.#base;
    const server = createServer((req, res) => {
      // A client that goes away mid-request is no failure of the fake; never let it crash the test.
      this.#handle(req, res).catch(() => res.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.#server = server;
    this.#base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this.#base;
  }

  get baseUrl(): string {
    return this.#base;
  }

  /** Stops listening and drops any held (hung) requests. */
  async stop(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = null;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /**
   * Creates a subscription as a browser would: a fresh P-256 key pair and a 16-octet auth secret,
   * restricted to `applicationServerKey` (the VAPID public key given to pushManager.subscribe())
   * unless it is null.
   */
  subscribe(applicationServerKey: string | null): FakeSubscription {
    if (!this.#server) throw new Error('FakePushService: start() before subscribe()');
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const auth = randomBytes(16);
    const id = b64u(randomBytes(18));
    const endpoint = `${this.#base}/push/${id}`;
    const sub: Registered = {
      id,
      endpoint,
      json: { endpoint, keys: { p256dh: b64u(ecdh.getPublicKey()), auth: b64u(auth) } },
      applicationServerKey,
      ecdh,
      auth,
      unsubscribed: false,
    };
    this.#subs.set(id, sub);
    const { ecdh: _e, auth: _a, unsubscribed: _u, ...pub } = sub;
    return pub;
  }

  /** The browser unsubscribed: later pushes get 410 Gone (errno 106). */
  unsubscribe(id: string): void {
    const s = this.#subs.get(id);
    if (s) s.unsubscribed = true;
  }

  /** Forces an answer for one subscription (until cleared with null). */
  setOutcome(id: string, outcome: Outcome | null): void {
    if (outcome === null) this.#outcomes.delete(id);
    else this.#outcomes.set(id, outcome);
  }

  /** The pushes received for one subscription, oldest first. */
  receivedFor(id: string): ReceivedPush[] {
    return this.received.filter((r) => r.subscriptionId === id);
  }

  /** Resolves with the first received push matching `match`, or null after `ms`. */
  waitFor(match: (r: ReceivedPush) => boolean, ms: number): Promise<ReceivedPush | null> {
    const found = this.received.find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => {
      const check = () => {
        const f = this.received.find(match);
        if (f) done(f);
      };
      const done = (v: ReceivedPush | null) => {
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve(v);
      };
      const timer = setTimeout(() => done(null), ms);
      this.#waiters.add(check);
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const m = /^\/push\/([A-Za-z0-9_-]+)$/.exec(path);
    if (!m) return error(res, 404, 102, 'Invalid token');
    if (req.method !== 'POST') return error(res, 405, null, 'Method not allowed');
    const id = m[1]!;
    const rec: ReceivedPush = {
      subscriptionId: id,
      path,
      headers: req.headers,
      ttl: header(req.headers, 'ttl'),
      urgency: header(req.headers, 'urgency'),
      topic: header(req.headers, 'topic'),
      vapid: null,
      body,
      plaintext: null,
      decryptError: null,
      status: 0,
      location: null,
    };
    this.received.push(rec);
    const answer = (
      status: number,
      errno: number | null,
      message: string,
      headers: Record<string, string> = {},
    ) => {
      rec.status = status;
      error(res, status, errno, message, headers);
      this.#notify();
    };

    const forced = this.#outcomes.get(id);
    // A hung push service: the request stays open, unanswered, until stop().
    if (forced?.status === 'hang') return this.#notify();

    const sub = this.#subs.get(id);
    if (!sub) return answer(404, 102, 'Invalid token');

    const auth = header(req.headers, 'authorization');
    if (!auth)
      return answer(
        401,
        109,
        'Missing VAPID authorization: this subscription is restricted to an application server key',
      );
    const parsed = parseVapid(auth);
    if (typeof parsed === 'string') return answer(401, 109, parsed);
    rec.vapid = parsed.seen;
    const invalid = checkVapid(parsed, this.#base, sub.applicationServerKey);
    if (invalid) return answer(403, 109, invalid);

    if (sub.unsubscribed) return answer(410, 106, 'No such subscription');
    if (rec.ttl === undefined) return answer(400, 111, 'Missing TTL value');
    if (!/^\d+$/.test(rec.ttl)) return answer(400, 111, `Invalid TTL value: ${rec.ttl}`);
    if (rec.urgency !== undefined && !['very-low', 'low', 'normal', 'high'].includes(rec.urgency)) {
      return answer(400, null, `Invalid Urgency: ${rec.urgency}`);
    }
    if (body.length > 0) {
      const enc = header(req.headers, 'content-encoding');
      if (enc !== 'aes128gcm')
        return answer(
          400,
          110,
          `Unknown Content-Encoding: ${enc ?? '(none)'}; this service accepts aes128gcm (RFC 8291)`,
        );
      if (body.length > MAX_BODY_OCTETS)
        return answer(
          413,
          104,
          `Data payload too large: ${body.length} octets, at most ${MAX_BODY_OCTETS}`,
        );
      const cryptoHeader = checkAes128gcmHeader(body);
      if (cryptoHeader) return answer(400, 110, cryptoHeader);
    }

    if (forced && forced.status !== 201) {
      switch (forced.status) {
        case 404:
          return answer(404, 102, 'Invalid token');
        case 410:
          return answer(410, 106, 'No such subscription', { 'cache-control': 'max-age=86400' });
        case 413:
          return answer(413, 104, `Data payload too large: at most ${MAX_BODY_OCTETS} octets`);
        case 429:
          return answer(
            429,
            null,
            'Too many requests for this subscription; slow down',
            forced.retryAfter === undefined ? {} : { 'retry-after': forced.retryAfter },
          );
        default:
          return answer(
            forced.status,
            null,
            'General error: the push service could not store the message',
            forced.status === 503 ? { 'retry-after': '120' } : {},
          );
      }
    }

    if (body.length > 0) {
      try {
        rec.plaintext = ece
          .decrypt(body, { version: 'aes128gcm', privateKey: sub.ecdh, authSecret: sub.auth })
          .toString('utf8');
      } catch (e) {
        // A real push service cannot read the payload; the user agent drops what it cannot decrypt.
        rec.decryptError = (e as Error).message;
      }
    }
    const messageId = b64u(randomBytes(24));
    const form = forced?.status === 201 ? forced.location : 'absolute';
    rec.location =
      form === 'none'
        ? null
        : form === 'relative'
          ? `/message/${messageId}`
          : `${this.#base}/message/${messageId}`;
    rec.status = 201;
    res.writeHead(201, {
      ...(rec.location === null ? {} : { location: rec.location }),
      ttl: rec.ttl,
      'content-length': '0',
    });
    res.end();
    this.#notify();
  }

  #notify(): void {
    for (const w of this.#waiters) w();
  }
}

function header(h: IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    // Keep enough to see an oversized body; never buffer without bound.
    if (size <= 1 << 20) chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

function error(
  res: ServerResponse,
  status: number,
  errno: number | null,
  message: string,
  headers: Record<string, string> = {},
): void {
  const reason: Record<number, string> = {
    400: 'Bad Request',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'Not Found',
    405: 'Method Not Allowed',
    410: 'Gone',
    413: 'Payload Too Large',
    429: 'Too Many Requests',
    500: 'Internal Server Error',
    502: 'Bad Gateway',
    503: 'Service Unavailable',
  };
  const body = JSON.stringify({
    code: status,
    errno,
    error: reason[status] ?? 'Error',
    message,
    more_info: MORE_INFO,
  });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    ...headers,
  });
  res.end(body);
}

interface ParsedVapid {
  seen: VapidSeen;
  signingInput: string;
  signature: Buffer;
}

/** Parses `vapid t=<JWT>, k=<key>` (RFC 8292 §3); a string is the reason it is malformed. */
function parseVapid(auth: string): ParsedVapid | string {
  const sp = auth.indexOf(' ');
  if (sp < 0 || auth.slice(0, sp).toLowerCase() !== 'vapid')
    return 'Unknown auth scheme: expected vapid';
  const params = new Map<string, string>();
  for (const part of auth.slice(sp + 1).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) params.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
  }
  const t = params.get('t');
  const k = params.get('k');
  if (!t) return 'Missing VAPID token';
  if (!k) return 'Missing VAPID public key';
  const parts = t.split('.');
  if (parts.length !== 3) return 'Invalid VAPID token: not a JWS compact serialization';
  try {
    const jwtHeader = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8')) as Record<
      string,
      unknown
    >;
    const claims = JSON.parse(
      Buffer.from(parts[1]!, 'base64url').toString('utf8'),
    ) as VapidSeen['claims'];
    return {
      seen: { jwtHeader, claims, publicKey: k },
      signingInput: `${parts[0]}.${parts[1]}`,
      signature: Buffer.from(parts[2]!, 'base64url'),
    };
  } catch {
    return 'Invalid VAPID token: header or claims are not JSON';
  }
}

/** RFC 8292 §2 and §4.2; returns why the authentication is invalid, or null when it is valid. */
function checkVapid(p: ParsedVapid, origin: string, restrictedTo: string | null): string | null {
  const { jwtHeader, claims, publicKey } = p.seen;
  if (jwtHeader.alg !== 'ES256')
    return `Invalid VAPID token: alg ${String(jwtHeader.alg)}, expected ES256`;
  const raw = Buffer.from(publicKey, 'base64url');
  if (raw.length !== 65 || raw[0] !== 0x04) return 'Invalid VAPID public key';
  let ok = false;
  try {
    const key = createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: b64u(raw.subarray(1, 33)), y: b64u(raw.subarray(33)) },
      format: 'jwk',
    });
    ok = verify(
      'sha256',
      Buffer.from(p.signingInput),
      { key, dsaEncoding: 'ieee-p1363' },
      p.signature,
    );
  } catch {
    return 'Invalid VAPID public key';
  }
  if (!ok) return 'Invalid VAPID token: the signature does not verify with the given public key';
  if (claims.aud !== origin)
    return `Invalid VAPID audience: ${String(claims.aud)}, expected ${origin}`;
  const now = Math.floor(Date.now() / 1000);
  if (typeof claims.exp !== 'number' || claims.exp <= now) return 'Invalid VAPID expiry';
  if (claims.exp > now + MAX_VAPID_LIFETIME_S) return 'The VAPID token expiration is too long';
  if (typeof claims.sub !== 'string' || !/^(mailto:|https:)/.test(claims.sub))
    return 'Invalid VAPID subject: a mailto: or https: contact is required';
  if (restrictedTo !== null && publicKey !== restrictedTo) return 'VAPID public key mismatch';
  return null;
}

/** RFC 8291 §4: a single aes128gcm record whose keyid is the sender's uncompressed P-256 key. */
function checkAes128gcmHeader(body: Buffer): string | null {
  if (body.length < 21) return 'Invalid crypto header: truncated';
  const rs = body.readUInt32BE(16);
  const idlen = body[20]!;
  if (idlen !== 65 || body.length < 21 + idlen || body[21] !== 0x04)
    return 'Invalid crypto header: keyid must be the 65-octet sender public key';
  if (body.length - 21 - idlen > rs)
    return 'Invalid crypto header: the payload must be a single record';
  return null;
}

/** A convenience for tests: starts a fake and returns it with its base URL. */
export async function startFakePushService(): Promise<{ fake: FakePushService; baseUrl: string }> {
  const fake = new FakePushService();
  return { fake, baseUrl: await fake.start() };
}
