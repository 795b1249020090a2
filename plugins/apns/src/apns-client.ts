import {
  permanentError,
  transientError,
  type OutboundMessage,
  type PluginLogger,
  type SendResult,
} from '@ens/plugin-sdk';
import { originOf, type ApnsConfig } from './config.ts';
import { errorFor, refusalOf } from './error-classes.ts';
import { Http2Origin, TransportError, type Http2Answer } from './http2-origin.ts';
import { requestFor } from './notification.ts';
import { ProviderTokenCache, type ProviderToken } from './provider-token.ts';

export interface ClientOptions {
  logger: PluginLogger;
  /** The clock for provider-token ages and apns-expiration; tests move it. */
  now?: () => number;
}

/** A device token no app has: APNs checks the provider token before it looks the device up. */
const PROBE_DEVICE = '0'.repeat(64);
const TOPIC_REASONS = new Set([
  'BadTopic',
  'TopicDisallowed',
  'MissingTopic',
  'DeviceTokenNotForTopic',
]);

export class ApnsClient {
  private readonly origin: Http2Origin;
  private readonly tokens: ProviderTokenCache;
  private readonly now: () => number;
  private readonly timeoutMs: number;

  constructor(
    private readonly config: ApnsConfig,
    opts: ClientOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.timeoutMs = config.timeoutMs ?? 10_000;
    this.tokens = new ProviderTokenCache(config.teamId, config.keyId, config.privateKey, this.now);
    this.origin = new Http2Origin(originOf(config), { ca: config.ca, logger: opts.logger });
  }

  async send(m: OutboundMessage): Promise<SendResult> {
    const req = requestFor(this.config, m, this.now());
    const answer = await this.post(req.headers, req.body);
    if (answer.status >= 200 && answer.status < 300) {
      const id = answer.headers['apns-id'];
      return { providerMessageId: typeof id === 'string' && id !== '' ? id : req.apnsId };
    }
    throw errorFor(refusalOf(answer));
  }

  /**
   * Posts a silent push to a device token no app has. APNs answers 403 for a bad provider token
   * before it looks at the device, so anything else (400 BadDeviceToken, as a rule) means the key,
   * key id and team id are good; a topic reason means the bundle id is not the team's.
   */
  async checkCredentials(): Promise<void> {
    const body = Buffer.from('{"aps":{"content-available":1}}');
    const answer = await this.post(
      {
        ':method': 'POST',
        ':path': `/3/device/${PROBE_DEVICE}`,
        'apns-topic': this.config.topic,
        'apns-push-type': 'background',
        'apns-priority': '5',
        'apns-expiration': '0',
        'content-length': String(body.length),
      },
      body,
    );
    if (answer.status >= 200 && answer.status < 300) return;
    const r = refusalOf(answer);
    if (r.status === 400 && TOPIC_REASONS.has(r.reason))
      throw permanentError(
        `apns 400 ${r.reason}: topic ${this.config.topic} is not an app of team ${this.config.teamId}`,
      );
    if (r.status === 403 || r.status === 429 || r.status >= 500) throw errorFor(r);
  }

  close(): Promise<void> {
    return this.origin.close();
  }

  /** One notification with the shared provider token, renewed once if APNs calls it expired. */
  private async post(headers: Record<string, string>, body: Buffer): Promise<Http2Answer> {
    const deadline = Date.now() + this.timeoutMs;
    const token = this.tokens.current();
    const answer = await this.attempt(headers, body, token, deadline);
    if (!isExpiredToken(answer)) return answer;
    const fresh = this.tokens.renewAfterExpired(token);
    if (!fresh) {
      const ageS = Math.round((this.now() - token.issuedAt) / 1000);
      throw transientError(
        `apns 403 ExpiredProviderToken: APNs calls a provider token minted ${ageS} s ago expired; check this server's clock (Apple allows a new token only every 20 minutes)`,
      );
    }
    const again = await this.attempt(headers, body, fresh, deadline);
    if (isExpiredToken(again))
      throw transientError(
        "apns 403 ExpiredProviderToken even with a token minted just now; check this server's " +
          'clock',
      );
    return again;
  }

  private async attempt(
    headers: Record<string, string>,
    body: Buffer,
    token: ProviderToken,
    deadline: number,
  ): Promise<Http2Answer> {
    const withAuth = { ...headers, authorization: `bearer ${token.jwt}` };
    try {
      return await this.origin.request(withAuth, body, deadline - Date.now());
    } catch (e) {
      if (!(e instanceof TransportError)) throw e;
      // APNs never saw it (refused stream, GOAWAY before it was sent): safe to send once more on
      // a fresh connection without risking a double notification.
      if (e.unprocessed && deadline - Date.now() > 0) {
        try {
          return await this.origin.request(withAuth, body, deadline - Date.now());
        } catch (e2) {
          // Both, so that a resend that ran out of the time left does not hide what APNs did.
          const again = (e2 as Error).message.replace(/^apns: /, '');
          throw transientError(`${e.message}; sent again on a new connection: ${again}`, e2);
        }
      }
      throw transientError(e.message, e);
    }
  }
}

function isExpiredToken(a: Http2Answer): boolean {
  return a.status === 403 && refusalOf(a).reason === 'ExpiredProviderToken';
}
