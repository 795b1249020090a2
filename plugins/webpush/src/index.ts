import { randomUUID } from 'node:crypto';
import {
  definePlugin,
  permanentError,
  transientError,
  type OutboundMessage,
  type PluginContext,
  type Provider,
} from '@ens/plugin-sdk';
import { ConfigSchema, type WebPushConfig } from './config-schema.ts';
import { classifyAnswer } from './error-classes.ts';
import { buildPayload } from './payload.ts';
import { postPush, type PushOptions } from './push-request.ts';
import { allIdentities, identityFor, identityProblem } from './vapid-identity.ts';

/**
 * provider_message_id is stored with this bound; longer Location URLs give way to a generated id.
 */
const MAX_ID_LENGTH = 512;

/**
 * The push message resource (RFC 8030 §5) is the id the push service gives a message. Relative
 * Locations are resolved against the endpoint so the id is the same whichever form a service uses.
 */
function messageIdFrom(location: string | null, endpoint: string): string {
  if (location) {
    try {
      const url = new URL(location, endpoint).href;
      if (url.length <= MAX_ID_LENGTH) return url;
    } catch {
      // an unreadable Location is as good as none
    }
  }
  return `webpush-${randomUUID()}`;
}

function subscriptionOf(m: OutboundMessage, allowHttp: boolean) {
  const d = m.device;
  if (!d)
    throw permanentError(
      'webpush: the send carries no device; ENS passes one registered webpush device per send',
    );
  if (d.platform !== 'webpush')
    throw permanentError(`webpush: device ${d.token} is a ${d.platform} device, not webpush`);
  const s = d.subscription;
  if (
    !s ||
    typeof s.endpoint !== 'string' ||
    !s.keys ||
    typeof s.keys.p256dh !== 'string' ||
    typeof s.keys.auth !== 'string'
  ) {
    throw permanentError(
      `webpush: device ${d.token} has no push subscription (endpoint and keys p256dh, auth)`,
    );
  }
  let url: URL;
  try {
    url = new URL(s.endpoint);
  } catch {
    throw permanentError(`webpush: device ${d.token} has an endpoint that is not a URL`);
  }
  if (url.protocol !== 'https:' && !(allowHttp && url.protocol === 'http:')) {
    throw permanentError(
      `webpush: device ${d.token} has a ${url.protocol} endpoint; push services are https: (allowHttpEndpoints is for local test services)`,
    );
  }
  return s;
}

export default definePlugin<WebPushConfig>({
  name: 'webpush',
  channels: ['push'],
  pushPlatforms: ['webpush'],
  sdk: '^1.0.0',
  configSchema: ConfigSchema,
  create(config, context: PluginContext): Provider {
    const opts: PushOptions = {
      ttlSeconds: config.ttlSeconds ?? 86_400,
      urgency: config.urgency ?? 'normal',
      contentEncoding: config.contentEncoding ?? 'aes128gcm',
      timeoutMs: config.timeoutMs ?? 10_000,
    };
    const allowHttp = config.allowHttpEndpoints ?? false;
    return {
      async send(m) {
        const subscription = subscriptionOf(m, allowHttp);
        const identity = identityFor(config, m.tenantSettings);
        const a = await postPush(
          subscription,
          JSON.stringify(buildPayload(m)),
          identity,
          opts,
          context.outbound,
        );
        if (a.status < 200 || a.status > 299) {
          throw classifyAnswer({
            ...a,
            origin: new URL(subscription.endpoint).origin,
            app: identity.name,
          });
        }
        return {
          providerMessageId: messageIdFrom(a.headers.get('location'), subscription.endpoint),
        };
      },
      /**
       * Web Push has no call that checks credentials without a subscription, so this checks what
       * can be checked here: each identity's subject and keys are ones web-push signs with, and
       * each private key is the partner of its public key.
       */
      async checkCredentials() {
        const problems = allIdentities(config).flatMap((i) => {
          const p = identityProblem(i);
          return p === null ? [] : [`${i.name}: ${p}`];
        });
        if (problems.length > 0)
          throw transientError(`webpush: VAPID identity unusable — ${problems.join('; ')}`);
        context.logger.info(
          {
            identities: allIdentities(config).map((i) => ({
              name: i.name,
              publicKey: i.vapidPublicKey,
            })),
          },
          'webpush VAPID identities checked',
        );
      },
      async close() {},
    };
  },
});
