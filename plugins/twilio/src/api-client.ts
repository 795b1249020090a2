import { transientError } from '@ens/plugin-sdk';
import { DEFAULT_BASE_URL, DEFAULT_TIMEOUT_MS, type TwilioConfig } from './config.ts';
import { classifyFetchFailure, classifyResponse } from './error-classes.ts';

const USER_AGENT = 'ens-plugin-twilio/0.1.0';

/**
 * What ENS asks Twilio to send; From and MessagingServiceSid may both be present (From wins as
 * sender).
 */
export interface CreateMessage {
  to: string;
  body: string;
  from?: string;
  messagingServiceSid?: string;
  statusCallback?: string;
}

/**
 * The two REST calls ENS makes (create a Message, fetch the Account), with Twilio's HTTP Basic
 * authentication: AccountSid:AuthToken, or an API key SID:secret while the account SID stays in
 * the path (https://www.twilio.com/docs/usage/requests-to-twilio).
 */
export class TwilioApi {
  readonly #root: string;
  readonly #authorization: string;
  readonly #timeoutMs: number;

  constructor(config: TwilioConfig) {
    const base = (config.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    this.#root = `${base}/2010-04-01/Accounts/${encodeURIComponent(config.accountSid)}`;
    const [user, pass] =
      config.apiKeySid && config.apiKeySecret
        ? [config.apiKeySid, config.apiKeySecret]
        : [config.accountSid, config.authToken];
    this.#authorization = `Basic ${Buffer.from(`${user}:${pass}`, 'utf8').toString('base64')}`;
    this.#timeoutMs = config.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** POST …/Messages.json; resolves with the Message SID (SM…/MM…). */
  async createMessage(m: CreateMessage): Promise<{ sid: string; status: string | undefined }> {
    const form = new URLSearchParams();
    form.set('To', m.to);
    if (m.from !== undefined) form.set('From', m.from);
    if (m.messagingServiceSid !== undefined) form.set('MessagingServiceSid', m.messagingServiceSid);
    form.set('Body', m.body);
    if (m.statusCallback !== undefined) form.set('StatusCallback', m.statusCallback);
    const { status, text } = await this.#request('POST', `${this.#root}/Messages.json`, form);
    const json = parseJson(text);
    const sid = json?.sid;
    if (typeof sid !== 'string' || sid === '') {
      // Twilio answered 2xx but gave no id to follow the message by: treat it as an outage.
      throw transientError(`twilio: HTTP ${status} without a message sid in the answer`);
    }
    return { sid, status: typeof json?.status === 'string' ? json.status : undefined };
  }

  /**
   * GET …/Accounts/{AccountSid}.json; resolves with the account's status (active, suspended,
   * closed).
   */
  async fetchAccount(): Promise<{ status: string | undefined }> {
    const { text } = await this.#request('GET', `${this.#root}.json`);
    const json = parseJson(text);
    return { status: typeof json?.status === 'string' ? json.status : undefined };
  }

  async #request(
    method: 'GET' | 'POST',
    url: string,
    form?: URLSearchParams,
  ): Promise<{ status: number; text: string }> {
    const headers: Record<string, string> = {
      authorization: this.#authorization,
      accept: 'application/json',
      'user-agent': USER_AGENT,
    };
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: form?.toString(),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      // The body read shares the timeout: a server that sends headers and then stalls is no better.
      text = await res.text();
    } catch (e) {
      throw classifyFetchFailure(e, this.#timeoutMs);
    }
    if (res.status < 200 || res.status > 299)
      throw classifyResponse(res.status, text, res.headers.get('retry-after'));
    return { status: res.status, text };
  }
}

function parseJson(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}
