/**
 * A local stand-in for the APNs provider API (HTTP/2 over TLS, token-based authentication), for
 * this plugin's tests, its conformance fixture and ENS's end-to-end test. It follows Apple's docs:
 *   https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns
 *   https://developer.apple.com/documentation/usernotifications/establishing-a-token-based-connection-to-apns
 *   https://developer.apple.com/documentation/usernotifications/handling-notification-responses-from-apns
 *
 * What it checks, in APNs' order: POST only (405 MethodNotAllowed), path /3/device/<token>
 * (404 BadPath, 400 MissingDeviceToken), the bearer provider token (403 MissingProviderToken /
 * InvalidProviderToken: ES256 signature by a registered key, kid and iss; 403 ExpiredProviderToken
 * when iat is older than an hour; optionally 429 TooManyProviderTokenUpdates), the apns-* headers
 * (MissingTopic, TopicDisallowed, InvalidPushType, BadPriority, BadExpirationDate, BadMessageId,
 * BadCollapseId), the device token (64 hex digits, else BadDeviceToken) and the payload
 * (PayloadEmpty, 413 PayloadTooLarge over 4096 bytes). Like APNs it allows one stream per
 * connection until a request carries a valid provider token.
 *
 * The answer then comes from, in order: `answerNext` (a queue), `answerFor` (per device token), the
 * token's prefix (see `fakeDeviceToken`), else 200 with the apns-id echoed.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import http2, {
  type Http2Session,
  type Http2SecureServer,
  type ServerHttp2Stream,
  type IncomingHttpHeaders,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import { createDecoder, createVerifier } from 'fast-jwt';
import { generate as generateCertificate } from 'selfsigned';

/** Apple's documented reasons, with their status. */
export const APNS_REASONS = {
  BadCollapseId: 400,
  BadDeviceToken: 400,
  BadExpirationDate: 400,
  BadMessageId: 400,
  BadPriority: 400,
  BadTopic: 400,
  DeviceTokenNotForTopic: 400,
  DuplicateHeaders: 400,
  IdleTimeout: 400,
  InvalidPushType: 400,
  MissingDeviceToken: 400,
  MissingTopic: 400,
  PayloadEmpty: 400,
  TopicDisallowed: 400,
  BadCertificate: 403,
  BadCertificateEnvironment: 403,
  ExpiredProviderToken: 403,
  Forbidden: 403,
  InvalidProviderToken: 403,
  MissingProviderToken: 403,
  BadPath: 404,
  MethodNotAllowed: 405,
  ExpiredToken: 410,
  Unregistered: 410,
  PayloadTooLarge: 413,
  TooManyProviderTokenUpdates: 429,
  TooManyRequests: 429,
  InternalServerError: 500,
  ServiceUnavailable: 503,
  Shutdown: 503,
} as const;
export type ApnsReason = keyof typeof APNS_REASONS;
const REASON_LIST = Object.keys(APNS_REASONS) as ApnsReason[];

/**
 * How the fake answers: a documented reason (with its status), 'ok', or trouble below HTTP —
 * 'hang' never answers, 'reset' resets the stream, 'goaway' refuses the stream and ends the
 * connection with GOAWAY {"reason":"Shutdown"}, as APNs does when it goes down for maintenance.
 */
export type FakeAnswer = ApnsReason | 'ok' | 'hang' | 'reset' | 'goaway';

const SPECIAL_PREFIX = { hang: 'deadbeef', reset: 'dead0e5e', goaway: 'deadc0de' } as const;

/**
 * A 64-hex device token the fake answers in a fixed way, so fixtures and ENS's end-to-end test can
 * register devices with known outcomes: 'fa11' + status + the reason's index for a refusal,
 * 'deadbeef…' hang, 'dead0e5e…' reset, 'deadc0de…' GOAWAY; any other token is accepted ('ok'
 * tokens start with 1 and carry `n` so several distinct devices can be made).
 */
export function fakeDeviceToken(answer: FakeAnswer = 'ok', n = 0): string {
  if (answer === 'ok') return `1${n.toString(16).padStart(7, '0')}`.padEnd(64, 'a');
  if (answer === 'hang' || answer === 'reset' || answer === 'goaway')
    return SPECIAL_PREFIX[answer].padEnd(64, '0');
  const idx = REASON_LIST.indexOf(answer);
  return `fa11${APNS_REASONS[answer]}${String(idx).padStart(2, '0')}`.padEnd(64, '0');
}

function answerByPrefix(token: string): FakeAnswer {
  const t = token.toLowerCase();
  for (const [k, p] of Object.entries(SPECIAL_PREFIX)) if (t.startsWith(p)) return k as FakeAnswer;
  const m = /^fa11(\d{3})(\d{2})/.exec(t);
  if (m) {
    const reason = REASON_LIST[Number(m[2])];
    if (reason && String(APNS_REASONS[reason]) === m[1]) return reason;
  }
  return 'ok';
}

/** A throwaway APNs signing key as Apple hands it out: a PKCS#8 P-256 key in PEM (the .p8 file). */
export function generateApnsKey(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', {
    namedCurve: 'prime256v1',
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKey, publicKey };
}

/** A key registered in the fake developer account. */
export interface FakeApnsKey {
  teamId: string;
  keyId: string;
  /** SPKI PEM of the key's public half. */
  publicKey: string;
}

export interface FakeApnsOptions {
  keys: FakeApnsKey[];
  /** Bundle ids of the team's apps; another apns-topic gets 400 TopicDisallowed. */
  topics: string[];
  /** The fake's clock in ms (provider-token ages, 410 timestamps). */
  now?: () => number;
}

export interface ReceivedNotification {
  at: Date;
  /** Which connection it came on (1 = the first the fake accepted). */
  session: number;
  method: string;
  path: string;
  deviceToken: string | undefined;
  /** Regular (non-pseudo) request headers, lower case. */
  headers: Record<string, string>;
  rawBody: Buffer;
  /** The JSON payload, or undefined when the body was not JSON. */
  payload: unknown;
  /** The provider token as decoded (before verification). */
  jwt?: { header: Record<string, unknown>; claims: Record<string, unknown> };
  /** What the fake answered. */
  answer: { status: number; reason?: string } | 'hang' | 'reset' | 'goaway';
}

const PUSH_TYPES = new Set([
  'alert',
  'background',
  'location',
  'voip',
  'complication',
  'fileprovider',
  'mdm',
  'liveactivity',
  'pushtotalk',
  'widgets',
]);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const decode = createDecoder({ complete: true });

export class FakeApns {
  readonly received: ReceivedNotification[] = [];
  /** PEM of the fake's TLS certificate: pass it as the plugin's `ca`. Set by start(). */
  certPem = '';
  url = '';
  /** Apple rejects provider tokens older than an hour. */
  tokenMaxAgeSec = 3600;
  /**
   * When > 0, a new provider token (new iat) for a key sooner than this after the last gets 429
   * TooManyProviderTokenUpdates.
   */
  tokenUpdateMinIntervalSec = 0;
  now: () => number;

  private server: Http2SecureServer | undefined;
  private readonly sessions = new Set<Http2Session>();
  private readonly sessionIds = new WeakMap<Http2Session, number>();
  private readonly authenticated = new WeakSet<Http2Session>();
  private readonly hanging = new Set<ServerHttp2Stream>();
  private readonly perToken = new Map<string, FakeAnswer>();
  private readonly queue: FakeAnswer[] = [];
  private readonly tokenUpdates = new Map<string, { iat: number; changedAt: number }>();
  private accepted = 0;

  constructor(private readonly opts: FakeApnsOptions) {
    this.now = opts.now ?? Date.now;
  }

  /**
   * Starts listening on 127.0.0.1 with a fresh self-signed certificate; resolves with the base URL.
   */
  async start(): Promise<string> {
    const pems = await generateCertificate([{ name: 'commonName', value: 'fake-apns.test' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [
        { name: 'basicConstraints', cA: false },
        {
          name: 'subjectAltName',
          altNames: [
            { type: 7, ip: '127.0.0.1' },
            { type: 2, value: 'localhost' },
          ],
        },
      ],
    });
    this.certPem = pems.cert;
    // One stream per connection until a request proves a valid provider token, as APNs does.
    const server = http2.createSecureServer({
      key: pems.private,
      cert: pems.cert,
      settings: { maxConcurrentStreams: 1 },
    });
    server.on('session', (s) => {
      this.sessions.add(s);
      this.sessionIds.set(s, ++this.accepted);
      s.on('close', () => this.sessions.delete(s));
      s.on('error', () => {}); // a client vanishing mid-frame is not the fake's failure
    });
    server.on('stream', (stream, headers) => this.onStream(stream, headers));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
    this.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    for (const s of this.hanging) s.destroy();
    this.hanging.clear();
    for (const s of this.sessions) s.destroy();
    this.sessions.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Connections accepted since start. */
  get sessionsAccepted(): number {
    return this.accepted;
  }

  /** Connections still open. */
  get openSessions(): number {
    return this.sessions.size;
  }

  /** The next `times` requests that pass authentication get this answer, whatever their token. */
  answerNext(answer: FakeAnswer, times = 1): void {
    for (let i = 0; i < times; i++) this.queue.push(answer);
  }

  /** Every request to this device token gets this answer (overrides its prefix). */
  answerFor(deviceToken: string, answer: FakeAnswer): void {
    this.perToken.set(deviceToken.toLowerCase(), answer);
  }

  /** Ends every connection the way APNs does for maintenance: GOAWAY, then close. */
  closeSessions(reason = 'Shutdown'): void {
    for (const s of this.sessions) {
      s.goaway(
        http2.constants.NGHTTP2_NO_ERROR,
        undefined,
        Buffer.from(JSON.stringify({ reason })),
      );
      s.close();
    }
  }

  /** Drops every connection without a word (a network failure). */
  destroySessions(): void {
    for (const s of this.sessions) s.destroy();
  }

  /** Forgets what was received and every knob set since start. */
  reset(): void {
    this.received.length = 0;
    this.perToken.clear();
    this.queue.length = 0;
    this.tokenUpdates.clear();
    this.tokenMaxAgeSec = 3600;
    this.tokenUpdateMinIntervalSec = 0;
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => {});
    stream.on('end', () => this.handle(stream, headers, Buffer.concat(chunks)));
  }

  private handle(stream: ServerHttp2Stream, h: IncomingHttpHeaders, body: Buffer): void {
    const session = stream.session;
    const method = String(h[':method'] ?? '');
    const path = String(h[':path'] ?? '');
    const plain: Record<string, string> = {};
    for (const [k, v] of Object.entries(h))
      if (!k.startsWith(':') && v !== undefined)
        plain[k] = Array.isArray(v) ? v.join(', ') : String(v);
    const pathMatch = /^\/3\/device\/([^/?]*)$/.exec(path);
    let payload: unknown;
    try {
      payload = body.length ? JSON.parse(body.toString('utf8')) : undefined;
    } catch {
      payload = undefined;
    }
    const rec: ReceivedNotification = {
      at: new Date(this.now()),
      session: session ? (this.sessionIds.get(session) ?? 0) : 0,
      method,
      path,
      deviceToken: pathMatch?.[1] || undefined,
      headers: plain,
      rawBody: body,
      payload,
      answer: { status: 0 },
    };
    this.received.push(rec);

    const refuse = (reason: ApnsReason) => {
      const status = APNS_REASONS[reason];
      const out: Record<string, unknown> = { reason };
      if (status === 410) out.timestamp = this.now() - 86_400_000;
      rec.answer = { status, reason };
      const apnsId =
        typeof h['apns-id'] === 'string' && UUID.test(h['apns-id']) ? h['apns-id'] : randomUUID();
      stream.respond({ ':status': status, 'apns-id': apnsId, 'content-type': 'application/json' });
      stream.end(JSON.stringify(out));
    };

    if (method !== 'POST') {
      refuse('MethodNotAllowed');
      return;
    }
    if (!pathMatch) {
      refuse('BadPath');
      return;
    }
    const auth = this.authenticate(h, rec);
    if (auth) {
      refuse(auth);
      return;
    }
    if (session && !this.authenticated.has(session)) {
      this.authenticated.add(session);
      session.settings({ maxConcurrentStreams: 1000 });
    }
    const bad = this.checkRequest(h, rec.deviceToken, body);
    if (bad) {
      refuse(bad);
      return;
    }

    const answer =
      this.queue.shift() ??
      this.perToken.get(rec.deviceToken!.toLowerCase()) ??
      answerByPrefix(rec.deviceToken!);
    switch (answer) {
      case 'ok': {
        const apnsId = typeof h['apns-id'] === 'string' ? h['apns-id'] : randomUUID();
        rec.answer = { status: 200 };
        stream.respond({ ':status': 200, 'apns-id': apnsId });
        stream.end();
        return;
      }
      case 'hang':
        rec.answer = 'hang';
        this.hanging.add(stream);
        stream.on('close', () => this.hanging.delete(stream));
        return;
      case 'reset':
        rec.answer = 'reset';
        stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        return;
      case 'goaway':
        rec.answer = 'goaway';
        session?.goaway(
          http2.constants.NGHTTP2_NO_ERROR,
          undefined,
          Buffer.from('{"reason":"Shutdown"}'),
        );
        stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        session?.close();
        return;
      default:
        refuse(answer);
        return;
    }
  }

  /** The provider token checks; returns the 403/429 reason, or undefined when it is good. */
  private authenticate(h: IncomingHttpHeaders, rec: ReceivedNotification): ApnsReason | undefined {
    const authz = h.authorization;
    if (typeof authz !== 'string' || authz.trim() === '') return 'MissingProviderToken';
    const m = /^bearer\s+(\S+)$/i.exec(authz.trim());
    if (!m) return 'InvalidProviderToken';
    const jwt = m[1]!;
    let decoded: { header: Record<string, unknown>; payload: Record<string, unknown> };
    try {
      decoded = decode(jwt);
    } catch {
      return 'InvalidProviderToken';
    }
    rec.jwt = { header: decoded.header, claims: decoded.payload };
    if (decoded.header.alg !== 'ES256') return 'InvalidProviderToken';
    const key = this.opts.keys.find((k) => k.keyId === decoded.header.kid);
    if (!key) return 'InvalidProviderToken';
    try {
      createVerifier({ key: key.publicKey, algorithms: ['ES256'], cache: false })(jwt);
    } catch {
      return 'InvalidProviderToken';
    }
    const { iss, iat } = decoded.payload;
    if (iss !== key.teamId || typeof iat !== 'number' || !Number.isInteger(iat))
      return 'InvalidProviderToken';
    const nowS = this.now() / 1000;
    if (iat > nowS + 60) return 'InvalidProviderToken';
    if (nowS - iat > this.tokenMaxAgeSec) return 'ExpiredProviderToken';
    const last = this.tokenUpdates.get(key.keyId);
    if (!last || last.iat !== iat) {
      if (
        last &&
        this.tokenUpdateMinIntervalSec > 0 &&
        this.now() - last.changedAt < this.tokenUpdateMinIntervalSec * 1000
      )
        return 'TooManyProviderTokenUpdates';
      this.tokenUpdates.set(key.keyId, { iat, changedAt: this.now() });
    }
    return undefined;
  }

  private checkRequest(
    h: IncomingHttpHeaders,
    token: string | undefined,
    body: Buffer,
  ): ApnsReason | undefined {
    const topic = h['apns-topic'];
    if (typeof topic !== 'string' || topic === '') return 'MissingTopic';
    if (!this.opts.topics.includes(topic)) return 'TopicDisallowed';
    const pushType = h['apns-push-type'];
    if (pushType !== undefined && !PUSH_TYPES.has(String(pushType))) return 'InvalidPushType';
    const priority = h['apns-priority'];
    if (priority !== undefined && !['10', '5', '1'].includes(String(priority)))
      return 'BadPriority';
    if (pushType === 'background' && (priority === undefined || priority === '10'))
      return 'BadPriority';
    const exp = h['apns-expiration'];
    if (exp !== undefined && !/^\d+$/.test(String(exp))) return 'BadExpirationDate';
    const id = h['apns-id'];
    if (id !== undefined && !UUID.test(String(id))) return 'BadMessageId';
    const collapse = h['apns-collapse-id'];
    if (collapse !== undefined && Buffer.byteLength(String(collapse)) > 64) return 'BadCollapseId';
    if (!token) return 'MissingDeviceToken';
    if (!/^[0-9a-fA-F]{64}$/.test(token)) return 'BadDeviceToken';
    if (body.length === 0) return 'PayloadEmpty';
    if (body.length > (pushType === 'voip' ? 5120 : 4096)) return 'PayloadTooLarge';
    return undefined;
  }
}

/**
 * Starts a fake with one freshly generated key registered; what a test needs to configure the
 * plugin.
 */
export async function startFakeApns(
  opts: { teamId?: string; keyId?: string; topics?: string[]; now?: () => number } = {},
) {
  const key = generateApnsKey();
  const teamId = opts.teamId ?? 'TEAM123456';
  const keyId = opts.keyId ?? 'KEY1234567';
  const topics = opts.topics ?? ['com.example.app'];
  const fake = new FakeApns({
    keys: [{ teamId, keyId, publicKey: key.publicKey }],
    topics,
    now: opts.now,
  });
  const url = await fake.start();
  return {
    fake,
    url,
    key,
    /** A plugin configuration pointing at this fake with the registered key. */
    config: {
      teamId,
      keyId,
      privateKey: key.privateKey,
      topic: topics[0]!,
      baseUrl: url,
      ca: fake.certPem,
      timeoutMs: 2_000,
    },
  };
}
