import { transientError } from '@ens/plugin-sdk';
import { classifyGraphAnswer } from './graph-errors.ts';

/** A thin fetch wrapper for the Graph API: bearer auth, timeout, and failures thrown classified. */
export interface GraphClientOptions {
  graphUrl: string;
  apiVersion: string;
  accessToken: string;
  timeoutMs: number;
}

export class GraphClient {
  readonly #base: string;
  readonly #token: string;
  readonly #timeoutMs: number;

  constructor(o: GraphClientOptions) {
    this.#base = `${o.graphUrl.replace(/\/+$/, '')}/${o.apiVersion}`;
    this.#token = o.accessToken;
    this.#timeoutMs = o.timeoutMs;
  }

  /**
   * `path` is relative to the versioned base, e.g. `/123/messages`. Resolves with the parsed 2xx
   * body.
   */
  async request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    const url = `${this.#base}${path}`;
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      text = await res.text();
    } catch (e) {
      // The URL carries no secret (the token is in a header), so it is safe in last_error and logs.
      const why =
        (e as Error)?.name === 'TimeoutError'
          ? `no answer within ${this.#timeoutMs} ms`
          : String((e as Error)?.message ?? e);
      throw transientError(`whatsapp: ${method} ${url} failed: ${why}`, e);
    }
    if (!res.ok) throw classifyGraphAnswer(res.status, text, res.headers.get('retry-after'));
    try {
      return JSON.parse(text) as unknown;
    } catch (e) {
      throw transientError(
        `whatsapp: ${method} ${url} answered ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`,
        e,
      );
    }
  }
}
