import { EventEmitter } from 'node:events';
import type { Dispatcher } from 'undici';
import { checkOutboundUrl, resolvePublicAddress } from '@ens/core';
import { pinnedDispatcher } from '@ens/core/internal';

/**
 * One HTTP attempt of a callback. Retries, backoff and bookkeeping belong to the caller.
 *
 * Connection pinning: the URL is checked, the hostname is resolved once and every address is
 * checked, and the socket then connects to exactly that checked address (the original Host
 * header and TLS servername/certificate check are kept), through core's pinned dispatcher.
 */

export type PostOutcome =
  | { outcome: 'delivered'; status: number }
  | { outcome: 'failed'; status?: number; error: string };

export interface PostCallbackOptions {
  url: string;
  /** Sent byte-for-byte; must be the exact bytes that were signed. */
  rawBody: Buffer;
  /**
   * Signature and other headers. They override the defaults (`content-type: application/json`,
   * `user-agent: ENS-Callbacks/1`); `host`, `content-length`, `transfer-encoding`, `connection`
   * and `keep-alive` are ignored because the poster owns the target and the framing.
   */
  headers: Record<string, string>;
  /** Deadline for the whole attempt: DNS, connect, request, response headers and body drain. */
  timeoutMs: number;
  /** Skip the private/loopback address checks (self-hosted internal receivers, tests). */
  allowPrivate: boolean;
  /**
   * Use this dispatcher instead of the built-in pinned pools, e.g. a ProxyAgent to an egress
   * SSRF proxy, or a mock. The URL and DNS checks still run, but the dispatcher makes its own
   * connection, so pinning (and DNS-rebinding protection) is then the dispatcher's job.
   */
  dispatcher?: Dispatcher;
  /** Resolver for the DNS re-check; defaults to `dns.promises.lookup`. For tests. */
  lookup?: Parameters<typeof resolvePublicAddress>[1]['lookup'];
}

const USER_AGENT = 'ENS-Callbacks/1';
// Enough to let a typical small response finish so the socket goes back to the pool; anything
// bigger is cut off (closing that connection) rather than downloaded.
const MAX_DRAIN_BYTES = 4096;
// setTimeout fires immediately beyond this.
const MAX_TIMER_MS = 2 ** 31 - 1;
const IGNORED_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
]);

/**
 * The deadline of one attempt, handed to undici as the request's `signal`, which it also accepts as
 * an EventEmitter. An AbortController costs more than the request's own work: its listeners took
 * about 15 µs of CPU a post (client CPU a post to a local receiver, undici alone 22 µs, with an
 * AbortSignal 38–53 µs, with an emitter 32–35 µs), and posting is what the callbacks role spends
 * its one thread on.
 */
class Deadline extends EventEmitter {
  /**
   * Read by undici too, as it reads an AbortSignal's: a request given a passed deadline fails at
   * once.
   */
  aborted = false;
  readonly #timer: NodeJS.Timeout;

  constructor(ms: number) {
    super();
    this.#timer = setTimeout(() => {
      this.aborted = true;
      this.emit('abort');
    }, ms);
  }

  /** The promise's value, or null when the deadline passes first. */
  race<T>(p: Promise<T>): Promise<T | null> {
    if (this.aborted) return Promise.resolve(null);
    return new Promise<T | null>((resolve, reject) => {
      const expire = () => resolve(null);
      this.once('abort', expire);
      p.then(
        (v) => {
          this.off('abort', expire);
          resolve(v);
        },
        (err: unknown) => {
          this.off('abort', expire);
          reject(err);
        },
      );
    });
  }

  clear(): void {
    clearTimeout(this.#timer);
  }
}

/**
 * POSTs a callback once. Never throws.
 *
 * Returns `delivered` for any 2xx (even if reading the response body then fails: the receiver
 * has accepted it, and retrying would duplicate). Everything else is `failed` with a short
 * `error` fit for storing: `HTTP 503` (with `status`), `timeout after 10000 ms`,
 * `connect ECONNREFUSED`, the guard's refusal detail, etc. Redirects are not followed (3xx is
 * a failure), as the Standard Webhooks spec recommends.
 */
export async function postCallback(opts: PostCallbackOptions): Promise<PostOutcome> {
  let deadline: Deadline | undefined;
  try {
    const { timeoutMs } = opts;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) {
      return { outcome: 'failed', error: `invalid timeoutMs ${String(timeoutMs)}` };
    }
    deadline = new Deadline(Math.min(timeoutMs, MAX_TIMER_MS));
    const timedOut = (): PostOutcome => ({
      outcome: 'failed',
      error: `timeout after ${timeoutMs} ms`,
    });

    const checked = checkOutboundUrl(opts.url, { allowPrivate: opts.allowPrivate });
    if (!checked.ok) return { outcome: 'failed', error: `callback_url ${checked.detail}` };
    const url = checked.url;

    // The resolver cannot be cancelled, so the deadline races it instead.
    const resolved = await deadline.race(
      resolvePublicAddress(url.hostname, { allowPrivate: opts.allowPrivate, lookup: opts.lookup }),
    );
    if (resolved === null) return timedOut();
    if (!resolved.ok) return { outcome: 'failed', error: resolved.detail };

    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
    };
    for (const [name, value] of Object.entries(opts.headers ?? {})) {
      const key = name.toLowerCase();
      if (!IGNORED_HEADERS.has(key)) headers[key] = value;
    }

    const request: Dispatcher.RequestOptions = {
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers,
      body: opts.rawBody,
      signal: deadline,
    };

    let response: Dispatcher.ResponseData;
    try {
      const dispatcher =
        opts.dispatcher ?? pinnedDispatcher(url, resolved.address, resolved.family);
      response = await dispatcher.request(request);
    } catch (err) {
      return deadline.aborted ? timedOut() : { outcome: 'failed', error: describeError(err) };
    }

    const status = response.statusCode;
    try {
      await response.body.dump({ limit: MAX_DRAIN_BYTES });
    } catch {
      // The status is already known; a broken or slow body only costs this connection.
    }
    if (status >= 200 && status <= 299) return { outcome: 'delivered', status };
    return { outcome: 'failed', status, error: `HTTP ${status}` };
  } catch (err) {
    return { outcome: 'failed', error: describeError(err) };
  } finally {
    deadline?.clear();
  }
}

function describeError(err: unknown): string {
  const e = (err ?? {}) as { code?: unknown; syscall?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : undefined;
  const message = typeof e.message === 'string' && e.message !== '' ? e.message : String(err);
  let text: string;
  if (code !== undefined && typeof e.syscall === 'string') text = `${e.syscall} ${code}`;
  else if (code !== undefined && !message.includes(code)) text = `${message} (${code})`;
  else text = message;
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}
