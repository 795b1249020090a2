import http2, {
  type ClientHttp2Session,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from 'node:http2';
import tls from 'node:tls';
import type { PluginLogger } from '@ens/plugin-sdk';
import { EnsError } from '@ens/plugin-sdk';

export interface Http2Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A request that failed below HTTP. `unprocessed` means the server provably never acted on it
 * (refused stream, or the connection died before the stream was sent), so sending it again cannot
 * notify the device twice.
 */
export class TransportError extends EnsError {
  static override readonly code: string = 'ENS_ERR_APNS_TRANSPORT';
  constructor(
    message: string,
    readonly unprocessed: boolean,
    cause?: unknown,
  ) {
    super(message, { cause });
  }
}

interface LiveSession {
  session: ClientHttp2Session;
  /** Settles once the server's SETTINGS arrived (see `open`). */
  ready: Promise<void>;
}

/**
 * One long-lived HTTP/2 connection to an APNs origin, as Apple asks ("keep your connections open
 * rather than opening one per notification"). It is replaced after GOAWAY, an error or a close;
 * sessions draining after GOAWAY are kept until their streams end so close() can still stop them.
 */
export class Http2Origin {
  private current: LiveSession | undefined;
  private readonly all = new Set<ClientHttp2Session>();
  private closed = false;
  /** Apple puts {"reason": …} in the GOAWAY payload; kept to explain the streams it cut off. */
  private readonly goawayReasons = new WeakMap<ClientHttp2Session, string>();

  constructor(
    private readonly origin: string,
    private readonly opts: { ca?: string; logger: PluginLogger },
  ) {}

  async request(
    headers: OutgoingHttpHeaders,
    body: Buffer,
    timeoutMs: number,
  ): Promise<Http2Answer> {
    if (timeoutMs <= 0) throw new TransportError('apns: no time left for the request', false);
    const deadline = Date.now() + timeoutMs;
    const live = this.open();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        live.ready,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new TransportError(
                  `apns: could not connect to ${this.origin} within ${timeoutMs} ms`,
                  true,
                ),
              ),
            timeoutMs,
          );
        }),
      ]);
    } catch (e) {
      // A connection that never came up is useless to the next send as well.
      this.drop(live.session, true);
      throw e instanceof TransportError
        ? e
        : new TransportError(
            `apns: connecting to ${this.origin} failed: ${(e as Error).message}`,
            true,
            e,
          );
    } finally {
      clearTimeout(timer);
    }
    return this.exchange(live.session, headers, body, deadline - Date.now());
  }

  async close(): Promise<void> {
    this.closed = true;
    this.current = undefined;
    for (const s of this.all) s.destroy();
    this.all.clear();
  }

  private open(): LiveSession {
    if (this.closed) throw new TransportError('apns: the provider is closed', true);
    const cur = this.current;
    if (cur && !cur.session.closed && !cur.session.destroyed) return cur;

    const ca = this.opts.ca;
    // `ca` replaces Node's root store, so the extra PEM is added to the public roots, not swapped in.
    const session = http2.connect(this.origin, ca ? { ca: [...tls.rootCertificates, ca] } : {});
    this.all.add(session);
    session.on('error', (err) => {
      this.opts.logger.warn({ origin: this.origin, err: err.message }, 'apns connection error');
      this.drop(session, false);
    });
    session.on('goaway', (code: number, _last: number, data?: Buffer) => {
      const reason = goawayReason(data);
      if (reason) this.goawayReasons.set(session, reason);
      this.opts.logger.info(
        { origin: this.origin, code, reason },
        'apns sent GOAWAY; reconnecting on the next send',
      );
      this.drop(session, false);
    });
    session.on('close', () => {
      this.all.delete(session);
      this.drop(session, false);
    });
    // Before the server's SETTINGS arrive the client does not know APNs' stream limit (one stream
    // until a valid provider token) and would open streams APNs refuses; after them, nghttp2 queues
    // streams beyond the limit until APNs raises it.
    const ready = new Promise<void>((resolve, reject) => {
      session.once('remoteSettings', () => resolve());
      session.once('error', reject);
      session.once('close', () =>
        reject(
          new TransportError(
            `apns: the connection to ${this.origin} closed before it was ready`,
            true,
          ),
        ),
      );
    });
    ready.catch(() => {}); // observed by request(); this keeps an unawaited rejection quiet
    this.current = { session, ready };
    return this.current;
  }

  private drop(session: ClientHttp2Session, destroy: boolean): void {
    if (this.current?.session === session) this.current = undefined;
    if (destroy) session.destroy();
  }

  private exchange(
    session: ClientHttp2Session,
    headers: OutgoingHttpHeaders,
    body: Buffer,
    timeoutMs: number,
  ): Promise<Http2Answer> {
    return new Promise<Http2Answer>((resolve, reject) => {
      let settled = false;
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        fn();
      };
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request(headers, { endStream: false });
      } catch (e) {
        // The session went away between open() and here (GOAWAY just arrived): nothing was sent.
        this.drop(session, false);
        reject(
          new TransportError(`apns: could not open a stream: ${(e as Error).message}`, true, e),
        );
        return;
      }
      const timer = setTimeout(
        () => {
          finish(() =>
            reject(
              new TransportError(
                `apns: no answer within ${Math.max(0, Math.round(timeoutMs))} ms`,
                false,
              ),
            ),
          );
          stream.close(http2.constants.NGHTTP2_CANCEL);
        },
        Math.max(1, timeoutMs),
      );
      let status: number | undefined;
      let resHeaders: IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on('response', (h) => {
        status = Number(h[':status']);
        resHeaders = h;
      });
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        finish(() => {
          if (status === undefined)
            reject(new TransportError('apns: the stream ended without a response', false));
          else
            resolve({ status, headers: resHeaders, body: Buffer.concat(chunks).toString('utf8') });
        });
      });
      const cutOff = (cause?: unknown) => {
        const refused = stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM;
        // A stream the session never got to send (no id) was not seen by APNs either.
        const unsent = stream.id === undefined;
        const goaway = this.goawayReasons.get(session);
        const why = goaway ? ` (GOAWAY ${goaway})` : '';
        const what = refused
          ? 'APNs refused the stream'
          : `the stream closed before an answer (code ${stream.rstCode ?? 'none'})`;
        finish(() =>
          reject(
            new TransportError(
              `apns: ${what}${why}${cause ? `: ${(cause as Error).message}` : ''}`,
              refused || unsent,
              cause,
            ),
          ),
        );
      };
      stream.on('error', (err) => cutOff(err));
      stream.on('close', () => cutOff());
      stream.end(body);
    });
  }
}

function goawayReason(data: Buffer | undefined): string | undefined {
  if (!data || data.length === 0) return undefined;
  try {
    const j = JSON.parse(data.toString('utf8')) as { reason?: unknown };
    if (typeof j.reason === 'string') return j.reason;
  } catch {
    // not JSON: fall through to the raw text
  }
  return data.toString('utf8').slice(0, 200);
}
