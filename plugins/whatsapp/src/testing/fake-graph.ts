/**
 * A local stand-in for Meta's Graph API as the WhatsApp Cloud API uses it, for tests and ENS's
 * end-to-end run. It speaks the documented wire protocol: the versioned paths, Bearer tokens
 * (190 OAuthException on a bad one), the send-template JSON body, the success body with a wamid,
 * Graph error bodies with the Cloud API's codes, and the messages webhook with a real
 * X-Hub-Signature-256.
 *
 * Docs used:
 * - Send message templates / messages endpoint:
 *   https://developers.facebook.com/docs/whatsapp/message-templates/creation
 *   https://developers.facebook.com/documentation/business-messaging/whatsapp/catalogs/mpm-template-messages
 * - Error codes: https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes
 * - Status webhook: https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/
 * - Errors webhook: https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/errors
 * - Webhook verification and signatures: https://developers.facebook.com/docs/messenger-platform/webhook-reference
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeTemplate {
  name: string;
  /** Languages the template is approved in, e.g. ['en_US']. */
  languages: string[];
  /** How many {{n}} variables the body declares. */
  bodyParams: number;
  /** Whether the template has a URL button with a dynamic suffix at index 0. */
  urlButton?: boolean;
}

export interface FakeGraphOptions {
  accessToken?: string;
  /** Phone number id → display phone number of the numbers the token may send from. */
  phoneNumbers?: Record<string, string>;
  appSecret?: string;
  wabaId?: string;
  templates?: FakeTemplate[];
}

export interface ReceivedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  raw: string;
  /** The JSON body, or null when there was none or it did not parse. */
  body: unknown;
}

/** A Cloud API error the fake can answer with: HTTP status and Graph error fields. */
interface ErrorSpec {
  http: number;
  message: string;
  title: string;
  details: string;
  type?: string;
  subcode?: number;
}

/** The codes the fake knows, with the titles and details Meta's error-codes page gives. */
export const CLOUD_API_ERRORS: Record<number, ErrorSpec> = {
  4: {
    http: 400,
    title: 'Too many calls',
    message: '(#4) Application request limit reached',
    details: 'The app has reached its API call rate limit.',
  },
  80007: {
    http: 400,
    title: 'Rate limit issues',
    message: '(#80007) There have been too many calls to this WhatsApp Business account.',
    details: 'The WhatsApp Business Account has reached its rate limit.',
  },
  130429: {
    http: 400,
    title: 'Rate limit hit',
    message: '(#130429) Rate limit hit',
    details: 'Cloud API message throughput has been reached.',
  },
  131048: {
    http: 400,
    title: 'Spam rate limit hit',
    message: '(#131048) Spam rate limit hit',
    details:
      'Message failed to send because there are restrictions on how many messages can be sent ' +
      'from this phone number.',
  },
  131056: {
    http: 400,
    title: '(Business Account, Consumer Account) pair rate limit hit',
    message: '(#131056) (Business Account, Consumer Account) pair rate limit hit',
    details:
      'Message failed to send because there were too many messages sent from this phone number ' +
      'to the same phone number in a short period of time.',
  },
  131000: {
    http: 500,
    title: 'Something went wrong',
    message: '(#131000) Something went wrong',
    details: 'Message failed to send due to an unknown error.',
  },
  131016: {
    http: 503,
    title: 'Service unavailable',
    message: '(#131016) Service unavailable',
    details: 'A service is temporarily unavailable.',
  },
  131026: {
    http: 400,
    title: 'Message undeliverable',
    message: '(#131026) Message undeliverable',
    details:
      'Unable to deliver message. Reasons can include: the recipient phone number is not a ' +
      'WhatsApp phone number.',
  },
  131030: {
    http: 400,
    title: 'Recipient phone number not in allowed list',
    message: '(#131030) Recipient phone number not in allowed list',
    details:
      'Recipient phone number not in allowed list: Add recipient phone number to recipient ' +
      'list and try again.',
    subcode: 2655007,
  },
  131050: {
    http: 400,
    title: 'User stopped marketing messages',
    message: '(#131050) User stopped marketing messages',
    details:
      'Unable to deliver the message. This recipient has chosen to stop receiving marketing ' +
      'messages on WhatsApp from your business.',
  },
  131047: {
    http: 400,
    title: 'Re-engagement message',
    message: '(#131047) Re-engagement message',
    details:
      'Message failed to send because more than 24 hours have passed since the customer last ' +
      'replied to this number.',
  },
  131051: {
    http: 400,
    title: 'Unsupported message type',
    message: '(#131051) Unsupported message type',
    details: 'Unsupported message type.',
  },
  133010: {
    http: 400,
    title: 'Phone number not registered',
    message: '(#133010) Account not registered',
    details: 'The phone number is not registered on the WhatsApp Business Platform.',
  },
};

/** Recipients (digits, as in the body's `to`) that the fake answers with an error by default. */
export const FAKE_RECIPIENTS = {
  undeliverable: '15550131026',
  stoppedMarketing: '15550131050',
  notAllowed: '15550131030',
  throughput: '15550130429',
  pairRate: '15550131056',
  spamRate: '15550131048',
  somethingWrong: '15550131000',
  hang: '15550009999',
} as const;

export const FAKE_DEFAULTS = {
  accessToken: 'EAAG-fake-system-user-token',
  phoneNumberId: '106540352242922',
  displayPhoneNumber: '15550783881',
  appSecret: 'fake-app-secret',
  wabaId: '102290129340398',
  templates: [
    { name: 'hello_world', languages: ['en_US'], bodyParams: 0 },
    { name: 'order_update', languages: ['en_US', 'de'], bodyParams: 2, urlButton: true },
    { name: 'otp_code', languages: ['en'], bodyParams: 1 },
  ] satisfies FakeTemplate[],
};

export type WaStatusName = 'sent' | 'delivered' | 'read' | 'failed';

export interface StatusSpec {
  /** The wamid the status is about. */
  id: string;
  status: WaStatusName;
  /** Unix seconds; defaults to now. */
  timestamp?: number;
  /** Digits; defaults to the recipient the fake saw for this wamid. */
  recipientId?: string;
  /** For failed: the error code (one of CLOUD_API_ERRORS); defaults to 131026. */
  errorCode?: number;
}

export interface SignedWebhook {
  body: string;
  headers: Record<string, string>;
}

function fbtraceId(): string {
  return randomBytes(12).toString('base64').replace(/[+/=]/g, 'A');
}

/**
 * A wamid shaped like Meta's: "wamid." + base64 of a small binary record holding the recipient's
 * digits and an upper-case hex message id (e.g. wamid.HBgLMTY1MDUwNzY1MjAVAgARGBI5QTND…).
 */
export function fakeWamid(recipientDigits: string): string {
  const phone = Buffer.from(recipientDigits, 'ascii');
  const msg = Buffer.from(randomBytes(9).toString('hex').toUpperCase(), 'ascii');
  const rec = Buffer.concat([
    Buffer.from([0x1c, 0x18, phone.length]),
    phone,
    Buffer.from([0x15, 0x02, 0x00, 0x11, 0x18, msg.length]),
    msg,
    Buffer.from([0x00]),
  ]);
  return `wamid.${rec.toString('base64')}`;
}

export class FakeGraph {
  readonly accessToken: string;
  readonly appSecret: string;
  readonly wabaId: string;
  readonly phoneNumbers: Record<string, string>;
  readonly templates: FakeTemplate[];
  /** Everything the fake was asked, in order. */
  readonly received: ReceivedRequest[] = [];
  /** Recipient digits → a Cloud API error code to answer with, or 'hang' to never answer. */
  readonly recipientOutcomes = new Map<string, number | 'hang'>();
  /** When set, every request is held without an answer (a Graph API that stopped responding). */
  hangAll = false;
  /**
   * When set, each accepted send is followed by these statuses posted to `url`, `delayMs` apart.
   */
  autoReport: { url: string; statuses: WaStatusName[]; delayMs: number } | undefined;
  /** The wamids the fake handed out, with the recipient they went to. */
  readonly sent = new Map<string, { to: string; phoneNumberId: string; template: string }>();

  #server: Server | undefined;
  #baseUrl = '';
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(opts: FakeGraphOptions = {}) {
    this.accessToken = opts.accessToken ?? FAKE_DEFAULTS.accessToken;
    this.appSecret = opts.appSecret ?? FAKE_DEFAULTS.appSecret;
    this.wabaId = opts.wabaId ?? FAKE_DEFAULTS.wabaId;
    this.phoneNumbers = opts.phoneNumbers ?? {
      [FAKE_DEFAULTS.phoneNumberId]: FAKE_DEFAULTS.displayPhoneNumber,
    };
    this.templates = opts.templates ?? FAKE_DEFAULTS.templates.map((t) => ({ ...t }));
    this.recipientOutcomes.set(FAKE_RECIPIENTS.undeliverable, 131026);
    this.recipientOutcomes.set(FAKE_RECIPIENTS.stoppedMarketing, 131050);
    this.recipientOutcomes.set(FAKE_RECIPIENTS.notAllowed, 131030);
    this.recipientOutcomes.set(FAKE_RECIPIENTS.throughput, 130429);
    this.recipientOutcomes.set(FAKE_RECIPIENTS.pairRate, 131056);
    this.recipientOutcomes.set(FAKE_RECIPIENTS.spamRate, 131048);
    this.recipientOutcomes.set(FAKE_RECIPIENTS.somethingWrong, 131000);
    this.recipientOutcomes.set(FAKE_RECIPIENTS.hang, 'hang');
  }

  /** Listens on 127.0.0.1 on a free port; resolves with the base URL to use as `graphUrl`. */
  async start(): Promise<string> {
    const server = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => {
        // A bug in the fake must show as a failed request, not an unhandled rejection.
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`fake-graph error: ${String((e as Error)?.stack ?? e)}`);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.#server = server;
    this.#baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this.#baseUrl;
  }

  get baseUrl(): string {
    return this.#baseUrl;
  }

  /** Stops listening and drops held (hanging) connections. */
  async stop(): Promise<void> {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The sends received (POST …/messages), bodies parsed. */
  get sends(): ReceivedRequest[] {
    return this.received.filter((r) => r.method === 'POST' && r.path.endsWith('/messages'));
  }

  /**
   * The messages webhook for these statuses, as Meta would post it, signed with `appSecret`
   * (default: the fake's).
   */
  statusWebhook(
    statuses: StatusSpec[],
    opts: { appSecret?: string; phoneNumberId?: string } = {},
  ): SignedWebhook {
    const phoneNumberId =
      opts.phoneNumberId ?? Object.keys(this.phoneNumbers)[0] ?? FAKE_DEFAULTS.phoneNumberId;
    const envelope = {
      object: 'whatsapp_business_account',
      entry: [
        {
          id: this.wabaId,
          changes: [
            {
              value: {
                messaging_product: 'whatsapp',
                metadata: {
                  display_phone_number:
                    this.phoneNumbers[phoneNumberId] ?? FAKE_DEFAULTS.displayPhoneNumber,
                  phone_number_id: phoneNumberId,
                },
                statuses: statuses.map((s) => this.#status(s)),
              },
              field: 'messages',
            },
          ],
        },
      ],
    };
    const body = JSON.stringify(envelope);
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'x-hub-signature-256': `sha256=${createHmac('sha256', opts.appSecret ?? this.appSecret)
          .update(body)
          .digest('hex')}`,
      },
    };
  }

  /** Posts a status webhook to `url` exactly as Meta does; resolves with the answer. */
  async postStatusWebhook(
    url: string,
    statuses: StatusSpec[],
    opts: { appSecret?: string } = {},
  ): Promise<{ status: number; body: string }> {
    const hook = this.statusWebhook(statuses, opts);
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...hook.headers, 'user-agent': 'facebookexternalua' },
      body: hook.body,
    });
    return { status: res.status, body: await res.text() };
  }

  #status(s: StatusSpec): Record<string, unknown> {
    const to = s.recipientId ?? this.sent.get(s.id)?.to ?? '15551234567';
    const out: Record<string, unknown> = {
      id: s.id,
      status: s.status,
      timestamp: String(s.timestamp ?? Math.floor(Date.now() / 1000)),
      recipient_id: to,
    };
    if (s.status === 'sent' || s.status === 'delivered') {
      out.conversation = {
        id: randomBytes(16).toString('hex'),
        expiration_timestamp: String(Math.floor(Date.now() / 1000) + 86_400),
        origin: { type: 'utility' },
      };
      out.pricing = { billable: true, pricing_model: 'PMP', category: 'utility', type: 'regular' };
    }
    if (s.status === 'failed') {
      const code = s.errorCode ?? 131026;
      const spec = CLOUD_API_ERRORS[code] ?? { title: 'Unknown error', details: 'Unknown error.' };
      out.errors = [
        {
          code,
          title: spec.title,
          message: spec.title,
          error_data: { details: spec.details },
          href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/',
        },
      ];
    }
    return out;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://fake');
    let body: unknown = null;
    try {
      body = raw === '' ? null : JSON.parse(raw);
    } catch {
      body = null;
    }
    this.received.push({
      method: req.method ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: { ...req.headers },
      raw,
      body,
    });
    if (this.hangAll) return; // never answered; stop() drops the socket

    const send = (status: number, payload: unknown) => {
      res.writeHead(status, {
        'content-type': 'application/json; charset=UTF-8',
        'x-fb-trace-id': fbtraceId(),
        'facebook-api-version': url.pathname.split('/')[1] ?? '',
      });
      res.end(JSON.stringify(payload));
    };
    const graphError = (
      status: number,
      e: { message: string; type?: string; code: number; subcode?: number; details?: string },
    ) => {
      send(status, {
        error: {
          message: e.message,
          type: e.type ?? 'OAuthException',
          code: e.code,
          ...(e.subcode !== undefined ? { error_subcode: e.subcode } : {}),
          ...(e.details !== undefined
            ? { error_data: { messaging_product: 'whatsapp', details: e.details } }
            : {}),
          fbtrace_id: fbtraceId(),
        },
      });
    };

    const m = /^\/(v[0-9]+\.[0-9]+)\/([^/]+)(\/messages)?\/?$/.exec(url.pathname);
    if (!m) {
      graphError(400, { message: `Unknown path components: ${url.pathname}`, code: 2500 });
      return;
    }
    const auth = req.headers.authorization;
    const token =
      typeof auth === 'string' && auth.startsWith('Bearer ')
        ? auth.slice(7)
        : url.searchParams.get('access_token');
    if (token !== this.accessToken) {
      graphError(401, {
        message: 'Invalid OAuth access token - Cannot parse access token',
        code: 190,
      });
      return;
    }
    const objectId = m[2]!;
    const isSend = m[3] !== undefined;
    if (!(objectId in this.phoneNumbers)) {
      graphError(400, {
        message: `Unsupported ${isSend ? 'post' : 'get'} request. Object with ID '${objectId}' does not exist, cannot be loaded due to missing permissions, or does not support this operation. Please read the Graph API documentation at https://developers.facebook.com/docs/graph-api`,
        type: 'GraphMethodException',
        code: 100,
        subcode: 33,
      });
      return;
    }
    if (!isSend) {
      if (req.method !== 'GET') {
        graphError(400, { message: 'Unsupported request method', code: 100 });
        return;
      }
      const fields = (url.searchParams.get('fields') ?? 'id').split(',');
      const node: Record<string, string> = { id: objectId };
      if (fields.includes('display_phone_number'))
        node.display_phone_number = this.phoneNumbers[objectId]!;
      if (fields.includes('verified_name')) node.verified_name = 'ENS Test';
      send(200, node);
      return;
    }
    if (req.method !== 'POST') {
      graphError(400, {
        message: 'Unsupported get request.',
        type: 'GraphMethodException',
        code: 100,
      });
      return;
    }
    this.#handleSend(body, objectId, graphError, send);
  }

  #handleSend(
    body: unknown,
    phoneNumberId: string,
    graphError: (
      status: number,
      e: { message: string; type?: string; code: number; subcode?: number; details?: string },
    ) => void,
    send: (status: number, payload: unknown) => void,
  ): void {
    const param = (name: string, details?: string) =>
      graphError(400, {
        message: `(#100) The parameter ${name} is required.`,
        code: 100,
        details: details ?? `The parameter ${name} is required.`,
      });
    const invalid = (details: string) =>
      graphError(400, { message: '(#100) Invalid parameter', code: 100, details });
    const b = body as Record<string, unknown> | null;
    if (b === null || typeof b !== 'object') {
      invalid('The request body is not a JSON object.');
      return;
    }
    if (b.messaging_product !== 'whatsapp') {
      param('messaging_product');
      return;
    }
    if (
      b.recipient_type !== undefined &&
      b.recipient_type !== 'individual' &&
      b.recipient_type !== 'group'
    ) {
      invalid('recipient_type must be individual or group.');
      return;
    }
    if (typeof b.to !== 'string' || b.to === '') {
      param('to');
      return;
    }
    if (!/^[0-9]{6,20}$/.test(b.to)) {
      invalid(`The parameter to (${b.to}) is not a valid phone number.`);
      return;
    }
    if (b.type !== 'template') {
      invalid('This fake accepts only type template.');
      return;
    }
    const tpl = b.template as
      | { name?: unknown; language?: { code?: unknown }; components?: unknown }
      | undefined;
    if (!tpl || typeof tpl !== 'object') {
      param('template');
      return;
    }
    if (typeof tpl.name !== 'string' || tpl.name === '') {
      param("template['name']");
      return;
    }
    if (!tpl.language || typeof tpl.language.code !== 'string' || tpl.language.code === '') {
      param("template['language']['code']");
      return;
    }

    const known = this.templates.find(
      (t) => t.name === tpl.name && t.languages.includes(tpl.language!.code as string),
    );
    if (!known) {
      graphError(404, {
        message: '(#132001) Template name does not exist in the translation',
        code: 132001,
        details: `template name (${tpl.name}) does not exist in ${tpl.language.code}`,
      });
      return;
    }
    const components = tpl.components === undefined ? [] : tpl.components;
    if (!Array.isArray(components)) {
      invalid("template['components'] must be an array.");
      return;
    }
    let bodyCount = 0;
    let buttonParams: unknown[] | undefined;
    for (const c of components as Record<string, unknown>[]) {
      const params = c?.parameters;
      if (
        !Array.isArray(params) ||
        !params.every((p) => p?.type === 'text' && typeof p.text === 'string')
      ) {
        invalid('Each component parameter must be {"type": "text", "text": string}.');
        return;
      }
      if (c.type === 'body') bodyCount += params.length;
      else if (c.type === 'button') {
        if (c.sub_type !== 'url' || c.index !== '0') {
          invalid('Only the URL button at index "0" is supported by this fake.');
          return;
        }
        buttonParams = params;
      } else {
        invalid(`Component type ${String(c.type)} is not supported by this fake.`);
        return;
      }
    }
    if (bodyCount !== known.bodyParams) {
      graphError(400, {
        message: '(#132000) Number of parameters does not match the expected number of params',
        code: 132000,
        details: `body: number of localizable_params (${bodyCount}) does not match the expected number of params (${known.bodyParams})`,
      });
      return;
    }
    if (known.urlButton && buttonParams === undefined) {
      graphError(400, {
        message: '(#131008) Required parameter is missing',
        code: 131008,
        details: 'buttons: Button at index 0 of type Url requires a parameter',
      });
      return;
    }
    if (!known.urlButton && buttonParams !== undefined) {
      graphError(400, {
        message: '(#132000) Number of parameters does not match the expected number of params',
        code: 132000,
        details:
          'button: number of localizable_params (1) does not match the expected number of ' +
          'params (0)',
      });
      return;
    }

    const outcome = this.recipientOutcomes.get(b.to);
    if (outcome === 'hang') return; // held open until stop()
    if (typeof outcome === 'number') {
      const spec = CLOUD_API_ERRORS[outcome];
      if (spec) {
        graphError(spec.http, {
          message: spec.message,
          code: outcome,
          details: spec.details,
          subcode: spec.subcode,
          type: spec.type,
        });
        return;
      }
    }

    const wamid = fakeWamid(b.to);
    this.sent.set(wamid, { to: b.to, phoneNumberId, template: tpl.name });
    send(200, {
      messaging_product: 'whatsapp',
      contacts: [{ input: b.to, wa_id: b.to }],
      messages: [{ id: wamid, message_status: 'accepted' }],
    });
    this.#scheduleAutoReport(wamid);
  }

  #scheduleAutoReport(wamid: string): void {
    const auto = this.autoReport;
    if (!auto) return;
    auto.statuses.forEach((status, i) => {
      const t = setTimeout(
        () => {
          this.#timers.delete(t);
          this.postStatusWebhook(auto.url, [{ id: wamid, status }]).catch(() => {
            // Meta retries failed webhook posts; the fake does not, and a test sees the missing
            // status.
          });
        },
        auto.delayMs * (i + 1),
      );
      this.#timers.add(t);
    });
  }
}
