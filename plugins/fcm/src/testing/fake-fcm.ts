/**
 * A local stand-in for Google's OAuth 2.0 token endpoint and the FCM HTTP v1 send endpoint, on one
 * HTTP server, speaking their wire protocols as Google documents them:
 *
 * - https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages/send
 * - https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages (Message)
 * - https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode
 * - https://firebase.google.com/docs/cloud-messaging/error-codes (error body examples)
 * - https://developers.google.com/identity/protocols/oauth2/service-account
 *   ("Using OAuth 2.0 for Server to Server Applications": JWT claim set, token request/response)
 * - RFC 7523 (JWT bearer grant), RFC 9110 §10.2.3 (Retry-After)
 *
 * Token endpoint: POST /token, form grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer and
 * assertion=<RS256 JWT>. The assertion's signature is checked with the public key of its header
 * kid among the keys of the account named by iss; aud must be this endpoint's URL; exp-iat at
 * most an hour; scope present. Refusals are Google's {"error", "error_description"} JSON.
 *
 * Send endpoint: POST /v1/projects/<project>/messages:send with "Authorization: Bearer <token it
 * issued>", the project of that token's account and a JSON body {"message": {...}}. The answer
 * is chosen by a queued knob (failNext) or else by the registration token's prefix (deviceToken);
 * errors carry Google's {"error": {code, message, status, details: [FcmError …]}} body.
 *
 * FCM has no delivery receipts over HTTP (delivery data is in BigQuery/Data API), so there is no
 * webhook to post. Message texts of the token-endpoint refusals and of the validation of the
 * body follow what Google answers as closely as its documentation and public reports show.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createDecoder, createVerifier } from 'fast-jwt';

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const SEND_SCOPES = [
  'https://www.googleapis.com/auth/firebase.messaging',
  'https://www.googleapis.com/auth/cloud-platform',
];
const FCM_ERROR = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const BAD_REQUEST = 'type.googleapis.com/google.rpc.BadRequest';
const CLOCK_SKEW_S = 300;

/** The answers the send endpoint can give besides success. */
export type FcmOutcome =
  | 'unregistered' // 404 NOT_FOUND, FcmError UNREGISTERED
  | 'invalid-token' // 400 INVALID_ARGUMENT "The registration token is not a valid FCM registration token"
  | 'invalid-argument' // 400 INVALID_ARGUMENT "Request contains an invalid argument."
  | 'sender-id-mismatch' // 403 PERMISSION_DENIED, FcmError SENDER_ID_MISMATCH
  | 'quota-exceeded' // 429 RESOURCE_EXHAUSTED, FcmError QUOTA_EXCEEDED, Retry-After
  | 'unavailable' // 503 UNAVAILABLE (Retry-After when unavailableRetryAfterSec is set)
  | 'internal' // 500 INTERNAL
  | 'third-party-auth' // 401 UNAUTHENTICATED, FcmError THIRD_PARTY_AUTH_ERROR
  | 'unauthenticated' // 401 UNAUTHENTICATED: the access token is refused
  | 'hang'; // accepts the request and never answers

export const FCM_OUTCOMES: readonly FcmOutcome[] = [
  'unregistered',
  'invalid-token',
  'invalid-argument',
  'sender-id-mismatch',
  'quota-exceeded',
  'unavailable',
  'internal',
  'third-party-auth',
  'unauthenticated',
  'hang',
];

const TOKEN_PREFIX = 'fcm-test:';

/**
 * A registration token for the fake. With an outcome, the send endpoint answers that error for
 * it; without, it accepts. Real tokens look like "<instance id>:APA91b…"; so do these.
 */
export function deviceToken(outcome?: FcmOutcome): string {
  const tail = `${randomBytes(8).toString('base64url')}:APA91b${randomBytes(48).toString('base64url')}`;
  return outcome ? `${TOKEN_PREFIX}${outcome}:${tail}` : tail;
}

function outcomeOfToken(token: string): FcmOutcome | undefined {
  if (!token.startsWith(TOKEN_PREFIX)) return undefined;
  const o = token.slice(TOKEN_PREFIX.length).split(':')[0] as FcmOutcome;
  return FCM_OUTCOMES.includes(o) ? o : undefined;
}

/** The fields of a service-account key file as the Firebase console downloads it. */
export interface ServiceAccountJson {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  auth_uri: string;
  token_uri: string;
  auth_provider_x509_cert_url: string;
  client_x509_cert_url: string;
  universe_domain: string;
}

/**
 * A throwaway service account with a fresh RSA key, shaped like Google's key file, whose
 * token_uri is `tokenUri` (the fake's /token). `publicKey` is what Google would hold for it.
 */
export function generateServiceAccount(opts: {
  tokenUri: string;
  projectId?: string;
  clientEmail?: string;
}): { serviceAccount: ServiceAccountJson; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const projectId = opts.projectId ?? 'ens-fake-project';
  const clientEmail =
    opts.clientEmail ??
    `firebase-adminsdk-${randomBytes(3).toString('hex').slice(0, 5)}@${projectId}.iam.gserviceaccount.com`;
  return {
    publicKey,
    serviceAccount: {
      type: 'service_account',
      project_id: projectId,
      private_key_id: randomBytes(20).toString('hex'),
      private_key: privateKey,
      client_email: clientEmail,
      client_id: String(
        100_000_000_000_000_000_000n + BigInt(`0x${randomBytes(8).toString('hex')}`),
      ),
      auth_uri: 'https://accounts.google.com/o/oauth2/auth',
      token_uri: opts.tokenUri,
      auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
      client_x509_cert_url: `https://www.googleapis.com/robot/v1/metadata/x509/${encodeURIComponent(clientEmail)}`,
      universe_domain: 'googleapis.com',
    },
  };
}

/** One request the fake received, as it arrived. */
export interface ReceivedRequest {
  endpoint: 'token' | 'send' | 'other';
  method: string;
  path: string;
  /** Lower-case names. */
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** token endpoint: the form fields. */
  form?: Record<string, string>;
  /** token endpoint: the decoded assertion (not verified here; see the status). */
  assertion?: { header: Record<string, unknown>; payload: Record<string, unknown> };
  /** send endpoint: the parsed JSON body, when it parsed. */
  json?: unknown;
  /** The HTTP status answered (undefined for a request left hanging). */
  status?: number;
}

/** A message the send endpoint accepted. */
export interface DeliveredMessage {
  name: string;
  projectId: string;
  message: Record<string, unknown>;
}

interface Account {
  projectId: string;
  keys: Map<string, string>; // kid → public key PEM
}

interface IssuedToken {
  clientEmail: string;
  projectId: string;
  scope: string;
  expiresAt: number;
}

interface TokenRefusal {
  status: number;
  error: string;
  description: string;
}

export class FakeFcm {
  /** Every request, in order of arrival. */
  readonly received: ReceivedRequest[] = [];
  /** Messages accepted by the send endpoint (not validate_only ones). */
  readonly delivered: DeliveredMessage[] = [];
  /** Successful token exchanges. */
  exchanges = 0;
  /** expires_in of the access tokens it issues. */
  tokenLifetimeSec = 3599;
  /** Retry-After (seconds) on QUOTA_EXCEEDED. */
  quotaRetryAfterSec = 7;
  /** Retry-After (seconds) on UNAVAILABLE; none when undefined. */
  unavailableRetryAfterSec: number | undefined;

  readonly #accounts = new Map<string, Account>();
  readonly #tokens = new Map<string, IssuedToken>();
  readonly #sendQueue: FcmOutcome[] = [];
  readonly #tokenQueue: TokenRefusal[] = [];
  readonly #sockets = new Set<Socket>();
  readonly #decode = createDecoder({ complete: true });
  #server: Server | undefined;
  #base = '';
  #seq = 0;

  /** Starts listening on 127.0.0.1 (a free port); resolves with the base URL. */
  async start(): Promise<string> {
    if (this.#server) return this.#base;
    const server = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => {
        // A bug in the fake must show in the test, not hang it.
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`fake-fcm: ${(e as Error)?.stack ?? String(e)}`);
      });
    });
    server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const addr = server.address();
    if (addr === null || typeof addr === 'string') throw new Error('fake-fcm: no port');
    this.#server = server;
    this.#base = `http://127.0.0.1:${addr.port}`;
    return this.#base;
  }

  /** Closes the server and every connection, hanging ones included. */
  async stop(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }

  /** The FCM base URL (config baseUrl). */
  get baseUrl(): string {
    if (!this.#base) throw new Error('fake-fcm: start() first');
    return this.#base;
  }

  /** The OAuth token endpoint (a service account's token_uri). */
  get tokenUri(): string {
    return `${this.baseUrl}/token`;
  }

  /** A fresh service account that the token endpoint accepts. */
  serviceAccount(opts: { projectId?: string; clientEmail?: string } = {}): ServiceAccountJson {
    const { serviceAccount, publicKey } = generateServiceAccount({
      tokenUri: this.tokenUri,
      ...opts,
    });
    this.trust(
      serviceAccount.client_email,
      serviceAccount.project_id,
      serviceAccount.private_key_id,
      publicKey,
    );
    return serviceAccount;
  }

  /**
   * A service account whose key the fake does not know: `like`'s account and project with
   * another key (as after the key was deleted in the console), or an unknown account.
   */
  untrustedServiceAccount(like?: ServiceAccountJson): ServiceAccountJson {
    return generateServiceAccount({
      tokenUri: this.tokenUri,
      projectId: like?.project_id,
      clientEmail: like?.client_email,
    }).serviceAccount;
  }

  /** Registers a public key for an account, as creating a key in the console does. */
  trust(clientEmail: string, projectId: string, kid: string, publicKeyPem: string): void {
    const a = this.#accounts.get(clientEmail) ?? { projectId, keys: new Map<string, string>() };
    a.keys.set(kid, publicKeyPem);
    this.#accounts.set(clientEmail, a);
  }

  /** The next `times` sends get this answer, whatever their token. */
  failNext(outcome: FcmOutcome, times = 1): void {
    for (let i = 0; i < times; i++) this.#sendQueue.push(outcome);
  }

  /** The next token exchange is refused with this Google OAuth error. */
  failNextTokenExchange(
    error = 'invalid_grant',
    description = 'Invalid JWT Signature.',
    status = 400,
  ): void {
    this.#tokenQueue.push({ status, error, description });
  }

  /** Forgets every access token issued so far: their next use is answered 401. */
  revokeAccessTokens(): void {
    this.#tokens.clear();
  }

  tokenRequests(): ReceivedRequest[] {
    return this.received.filter((r) => r.endpoint === 'token');
  }

  sendRequests(): ReceivedRequest[] {
    return this.received.filter((r) => r.endpoint === 'send');
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', this.#base);
    const rec: ReceivedRequest = {
      endpoint: 'other',
      method: req.method ?? '',
      path: url.pathname + url.search,
      headers: { ...req.headers },
      body: Buffer.concat(chunks).toString('utf8'),
    };
    this.received.push(rec);
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      rec.status = status;
      const text = typeof body === 'string' ? body : JSON.stringify(body, null, 2);
      res.writeHead(status, {
        'content-type':
          typeof body === 'string' ? 'text/html; charset=UTF-8' : 'application/json; charset=UTF-8',
        ...headers,
      });
      res.end(text);
    };
    if (url.pathname === '/token') {
      rec.endpoint = 'token';
      return this.#token(req, rec, send);
    }
    const m = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(url.pathname);
    if (m && req.method === 'POST') {
      rec.endpoint = 'send';
      return this.#send(decodeURIComponent(m[1]!), req, rec, send);
    }
    // Google's front end answers unknown URLs with an HTML page, not an API error.
    send(
      404,
      `<!DOCTYPE html><html lang=en><title>Error 404 (Not Found)!!1</title><p><b>404.</b> <ins>That's an error.</ins><p>The requested URL <code>${url.pathname}</code> was not found on this server.</html>`,
    );
  }

  #token(
    req: IncomingMessage,
    rec: ReceivedRequest,
    send: (s: number, b: unknown, h?: Record<string, string>) => void,
  ): void {
    const refuse = (error: string, description: string, status = 400) =>
      send(status, { error, error_description: description });
    if (req.method !== 'POST') {
      refuse('invalid_request', `Method ${req.method} not allowed; use POST`, 405);
      return;
    }
    const form = Object.fromEntries(new URLSearchParams(rec.body));
    rec.form = form;
    const queued = this.#tokenQueue.shift();
    if (queued) {
      refuse(queued.error, queued.description, queued.status);
      return;
    }
    if (
      !String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')
    ) {
      refuse('invalid_request', 'Content-Type must be application/x-www-form-urlencoded');
      return;
    }
    if (form.grant_type !== JWT_BEARER_GRANT) {
      refuse('unsupported_grant_type', `Invalid grant_type: ${form.grant_type ?? ''}`);
      return;
    }
    if (!form.assertion) {
      refuse('invalid_request', 'Missing required parameter: assertion');
      return;
    }
    let decoded: { header: Record<string, unknown>; payload: Record<string, unknown> };
    try {
      decoded = this.#decode(form.assertion) as typeof decoded;
    } catch {
      refuse('invalid_grant', 'Invalid JWT: not a JSON Web Token');
      return;
    }
    rec.assertion = { header: decoded.header, payload: decoded.payload };
    const { header, payload } = decoded;
    const account = typeof payload.iss === 'string' ? this.#accounts.get(payload.iss) : undefined;
    if (!account) {
      refuse('invalid_grant', 'Invalid grant: account not found');
      return;
    }
    const key = typeof header.kid === 'string' ? account.keys.get(header.kid) : undefined;
    if (header.alg !== 'RS256' || !key) {
      refuse('invalid_grant', 'Invalid JWT Signature.');
      return;
    }
    try {
      // Claims are checked below with Google's own messages; this checks the signature only.
      createVerifier({ key, algorithms: ['RS256'], ignoreExpiration: true, ignoreNotBefore: true })(
        form.assertion,
      );
    } catch {
      refuse('invalid_grant', 'Invalid JWT Signature.');
      return;
    }
    if (payload.aud !== this.tokenUri) {
      refuse(
        'invalid_grant',
        `Invalid JWT: Failed audience check. The right audience is ${this.tokenUri}`,
      );
      return;
    }
    const now = Math.floor(Date.now() / 1000);
    const { iat, exp } = payload;
    if (
      typeof iat !== 'number' ||
      typeof exp !== 'number' ||
      exp - iat > 3600 ||
      exp <= iat ||
      iat > now + CLOCK_SKEW_S ||
      exp < now - CLOCK_SKEW_S
    ) {
      refuse(
        'invalid_grant',
        'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable ' +
          'timeframe. Check your iat and exp values in the JWT claim.',
      );
      return;
    }
    if (typeof payload.scope !== 'string' || payload.scope.trim() === '') {
      refuse('invalid_scope', 'Invalid OAuth scope or ID token audience provided.');
      return;
    }
    const accessToken = `ya29.c.fake-${randomBytes(24).toString('base64url')}`;
    this.#tokens.set(accessToken, {
      clientEmail: payload.iss as string,
      projectId: account.projectId,
      scope: payload.scope,
      expiresAt: Date.now() + this.tokenLifetimeSec * 1000,
    });
    this.exchanges++;
    send(200, {
      access_token: accessToken,
      expires_in: this.tokenLifetimeSec,
      token_type: 'Bearer',
    });
  }

  #send(
    projectId: string,
    req: IncomingMessage,
    rec: ReceivedRequest,
    send: (s: number, b: unknown, h?: Record<string, string>) => void,
  ): void {
    const fail = (
      code: number,
      status: string,
      message: string,
      details?: Record<string, unknown>[],
      headers: Record<string, string> = {},
    ) => send(code, { error: { code, message, status, ...(details ? { details } : {}) } }, headers);
    const fcmError = (errorCode: string) => ({ '@type': FCM_ERROR, errorCode });
    const unauthenticated = (message: string, wwwAuth: string) =>
      fail(401, 'UNAUTHENTICATED', message, undefined, { 'www-authenticate': wwwAuth });
    const invalidCredentials = () =>
      unauthenticated(
        'Request had invalid authentication credentials. Expected OAuth 2 access token, login ' +
          'cookie or other valid authentication credential. See ' +
          'https://developers.google.com/identity/sign-in/web/devconsole-project.',
        'Bearer realm="https://accounts.google.com/", error="invalid_token"',
      );

    const auth = String(req.headers.authorization ?? '');
    const bearer = /^Bearer (\S+)$/i.exec(auth)?.[1];
    if (!bearer) {
      unauthenticated(
        'Request is missing required authentication credential. Expected OAuth 2 access token, ' +
          'login cookie or other valid authentication credential. See ' +
          'https://developers.google.com/identity/sign-in/web/devconsole-project.',
        'Bearer realm="https://accounts.google.com/"',
      );
      return;
    }
    const issued = this.#tokens.get(bearer);
    if (!issued || issued.expiresAt <= Date.now()) {
      invalidCredentials();
      return;
    }
    if (!issued.scope.split(/\s+/).some((s) => SEND_SCOPES.includes(s))) {
      fail(403, 'PERMISSION_DENIED', 'Request had insufficient authentication scopes.');
      return;
    }
    if (issued.projectId !== projectId) {
      fail(
        403,
        'PERMISSION_DENIED',
        `Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/${projectId}' (or it may not exist).`,
      );
      return;
    }

    const badRequest = (message: string, field?: string) =>
      fail(400, 'INVALID_ARGUMENT', message, [
        field === undefined
          ? fcmError('INVALID_ARGUMENT')
          : { '@type': BAD_REQUEST, fieldViolations: [{ field, description: message }] },
      ]);
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
      badRequest('Invalid JSON payload received. Content-Type must be application/json.', '');
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(rec.body);
    } catch (e) {
      badRequest(`Invalid JSON payload received. ${(e as Error).message}`, '');
      return;
    }
    rec.json = body;
    const shapeError = checkShape(body);
    if (shapeError) {
      badRequest(shapeError.message, shapeError.field);
      return;
    }
    const { message, validate_only } = body as {
      message: Record<string, unknown>;
      validate_only?: boolean;
    };
    if (typeof message.token !== 'string' || message.token === '') {
      badRequest('Recipient of the message is not set.');
      return;
    }

    const outcome = this.#sendQueue.shift() ?? outcomeOfToken(message.token);
    switch (outcome) {
      case 'hang':
        return; // held open until the client gives up or stop() closes it
      case 'unregistered':
        fail(404, 'NOT_FOUND', 'Requested entity was not found.', [fcmError('UNREGISTERED')]);
        return;
      case 'invalid-token':
        fail(
          400,
          'INVALID_ARGUMENT',
          'The registration token is not a valid FCM registration token',
          [fcmError('INVALID_ARGUMENT')],
        );
        return;
      case 'invalid-argument':
        fail(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.', [
          fcmError('INVALID_ARGUMENT'),
        ]);
        return;
      case 'sender-id-mismatch':
        fail(403, 'PERMISSION_DENIED', 'SenderId mismatch', [fcmError('SENDER_ID_MISMATCH')]);
        return;
      case 'quota-exceeded':
        fail(
          429,
          'RESOURCE_EXHAUSTED',
          'Sending limit exceeded for the message target.',
          [
            fcmError('QUOTA_EXCEEDED'),
            {
              '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
              violations: [{ subject: 'device', description: 'Device message rate exceeded.' }],
            },
          ],
          { 'retry-after': String(this.quotaRetryAfterSec) },
        );
        return;
      case 'unavailable':
        fail(
          503,
          'UNAVAILABLE',
          'The service is currently unavailable.',
          [fcmError('UNAVAILABLE')],
          this.unavailableRetryAfterSec === undefined
            ? {}
            : { 'retry-after': String(this.unavailableRetryAfterSec) },
        );
        return;
      case 'internal':
        fail(500, 'INTERNAL', 'Internal error encountered.', [fcmError('INTERNAL')]);
        return;
      case 'third-party-auth':
        fail(401, 'UNAUTHENTICATED', 'Auth error from APNS or Web Push Service', [
          fcmError('THIRD_PARTY_AUTH_ERROR'),
        ]);
        return;
      case 'unauthenticated':
        invalidCredentials();
        return;
      case undefined:
        break;
    }
    const id = `0:${Date.now()}${String(++this.#seq).padStart(4, '0')}%${randomBytes(8).toString('hex')}`;
    if (validate_only === true) {
      send(200, { name: `projects/${projectId}/messages/fake_message_id` });
      return;
    }
    const name = `projects/${projectId}/messages/${id}`;
    this.delivered.push({ name, projectId, message });
    send(200, { name });
  }
}

const MESSAGE_FIELDS = new Set([
  'name',
  'data',
  'notification',
  'android',
  'webpush',
  'apns',
  'fcm_options',
  'token',
  'topic',
  'condition',
]);
const NOTIFICATION_FIELDS = new Set(['title', 'body', 'image']);
// Keys FCM keeps for itself in the data payload (ErrorCode, "Invalid data key": from, gcm, any
// key prefixed by google; collapse_key is allowed and overridden).
const RESERVED_DATA_KEY = /^(from|notification|message_type)$|^(google|gcm)/;

/** The v1 API's proto-JSON checks, with its "Invalid JSON payload received" messages. */
function checkShape(body: unknown): { message: string; field: string } | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return { message: 'Invalid JSON payload received. Expected an object.', field: '' };
  for (const k of Object.keys(body)) {
    if (k !== 'message' && k !== 'validate_only' && k !== 'validateOnly')
      return {
        message: `Invalid JSON payload received. Unknown name "${k}": Cannot find field.`,
        field: '',
      };
  }
  const message = (body as { message?: unknown }).message;
  if (message === null || typeof message !== 'object' || Array.isArray(message))
    return { message: 'Message must be set.', field: 'message' };
  for (const k of Object.keys(message)) {
    if (!MESSAGE_FIELDS.has(k))
      return {
        message: `Invalid JSON payload received. Unknown name "${k}" at 'message': Cannot find field.`,
        field: 'message',
      };
  }
  const m = message as Record<string, unknown>;
  if (m.token !== undefined && typeof m.token !== 'string')
    return {
      message: `Invalid value at 'message.token' (TYPE_STRING), ${JSON.stringify(m.token)}`,
      field: 'message.token',
    };
  if (m.notification !== undefined) {
    if (m.notification === null || typeof m.notification !== 'object')
      return { message: "Invalid value at 'message.notification'", field: 'message.notification' };
    for (const [k, v] of Object.entries(m.notification)) {
      if (!NOTIFICATION_FIELDS.has(k))
        return {
          message: `Invalid JSON payload received. Unknown name "${k}" at 'message.notification': Cannot find field.`,
          field: 'message.notification',
        };
      if (typeof v !== 'string')
        return {
          message: `Invalid value at 'message.notification.${k}' (TYPE_STRING), ${JSON.stringify(v)}`,
          field: `message.notification.${k}`,
        };
    }
  }
  if (m.data !== undefined) {
    if (m.data === null || typeof m.data !== 'object' || Array.isArray(m.data))
      return { message: "Invalid value at 'message.data'", field: 'message.data' };
    let i = 0;
    for (const [k, v] of Object.entries(m.data)) {
      if (typeof v !== 'string')
        return {
          message: `Invalid value at 'message.data[${i}].value' (TYPE_STRING), ${JSON.stringify(v)}`,
          field: `message.data[${i}].value`,
        };
      if (RESERVED_DATA_KEY.test(k))
        return {
          message: `Invalid data payload key: ${k} is reserved by FCM`,
          field: `message.data[${i}].key`,
        };
      i++;
    }
  }
  return undefined;
}
