import { transientError } from '@ens/plugin-sdk';
import { AccessTokenSource, networkReason, snippet } from './access-token.ts';
import {
  classifySendFailure,
  isAccessTokenRefused,
  readFailure,
  type SendFailure,
} from './fcm-errors.ts';
import type { FcmMessage } from './fcm-message.ts';
import type { Credentials } from './service-account.ts';

type PostResult = { ok: true; name: string } | { ok: false; failure: SendFailure; token: string };

/** One configured Firebase project: its service account, its access token, its send endpoint. */
export class FcmApp {
  readonly name: string;
  readonly projectId: string;
  readonly #tokens: AccessTokenSource;
  readonly #sendUrl: string;
  readonly #timeoutMs: number;
  readonly #onTokenRefused: (app: FcmApp) => void;

  constructor(
    name: string,
    creds: Credentials,
    opts: {
      projectId?: string;
      baseUrl: string;
      timeoutMs: number;
      now?: () => number;
      onTokenRefused?: (app: FcmApp) => void;
    },
  ) {
    this.name = name;
    this.projectId = opts.projectId ?? creds.projectId;
    this.#tokens = new AccessTokenSource(creds, { timeoutMs: opts.timeoutMs, now: opts.now });
    this.#sendUrl = `${opts.baseUrl.replace(/\/+$/, '')}/v1/projects/${encodeURIComponent(this.projectId)}/messages:send`;
    this.#timeoutMs = opts.timeoutMs;
    this.#onTokenRefused = opts.onTokenRefused ?? (() => {});
  }

  /** Sends one message; resolves with FCM's message name ("projects/<p>/messages/<id>"). */
  async send(message: FcmMessage): Promise<string> {
    let r = await this.#post(await this.#tokens.get(), message);
    if (!r.ok && isAccessTokenRefused(r.failure)) {
      // The token was revoked or expired early: a refused request was not delivered, so one
      // retry with a fresh token is safe. A second refusal is classified (transient).
      this.#onTokenRefused(this);
      this.#tokens.invalidate(r.token);
      r = await this.#post(await this.#tokens.get(), message);
      if (!r.ok && isAccessTokenRefused(r.failure)) this.#tokens.invalidate(r.token);
    }
    if (r.ok) return r.name;
    throw classifySendFailure(r.failure);
  }

  /** Performs a token exchange now, whatever is cached: proves the key is still accepted. */
  async checkCredentials(): Promise<void> {
    await this.#tokens.refresh();
  }

  async #post(token: string, message: FcmMessage): Promise<PostResult> {
    let res: Response;
    try {
      res = await fetch(this.#sendUrl, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json; charset=utf-8',
          accept: 'application/json',
        },
        body: JSON.stringify({ message }),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (e) {
      throw transientError(
        `fcm: send to ${this.#sendUrl} failed: ${networkReason(e, this.#timeoutMs)}`,
        e,
      );
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw transientError(
        `fcm: reading FCM's answer (HTTP ${res.status}) failed: ${networkReason(e, this.#timeoutMs)}`,
        e,
      );
    }
    if (!res.ok)
      return {
        ok: false,
        failure: readFailure(res.status, res.headers.get('retry-after'), text),
        token,
      };
    let name: unknown;
    try {
      name = (JSON.parse(text) as { name?: unknown }).name;
    } catch {
      // handled below
    }
    if (typeof name !== 'string' || name === '') {
      throw transientError(
        `fcm: FCM answered ${res.status} without a message name: ${snippet(text)}`,
      );
    }
    return { ok: true, name };
  }
}
