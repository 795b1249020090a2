import webpush from 'web-push';
import type { OutboundMessage } from '@ens/plugin-sdk';
import { sampleMessage, type ConformanceFixture } from '@ens/plugin-sdk/conformance';
import type { WebPushConfig } from './config-schema.ts';
import {
  FakePushService,
  type FakeSubscription,
  type Outcome,
} from './testing/fake-push-service.ts';

/** One webpush send to a subscription of the fake, as ENS's worker builds it. */
export function pushTo(
  sub: FakeSubscription,
  overrides: Partial<OutboundMessage> = {},
): OutboundMessage {
  return sampleMessage('push', {
    deliveryId: '0190a0b0-0000-7000-8000-0000000000aa',
    recipient: 'user-1',
    content: {
      kind: 'rendered',
      subject: 'Conformance',
      body: 'conformance check',
      data: { k: 'v' },
    },
    device: { token: `sub-${sub.id}`, platform: 'webpush', subscription: sub.json },
    ...overrides,
  });
}

/**
 * A fake push service whose subscriptions are restricted to the fixture's VAPID key (as browsers'
 * are). wrongCredentials pairs that public key with another private key: checkCredentials finds
 * the halves do not belong together. (A whole other key pair is refused by the push service
 * itself, 403 on send; Web Push has no call that checks a key without a subscription.)
 */
const fixture: ConformanceFixture<WebPushConfig> = {
  async start() {
    const fake = new FakePushService();
    await fake.start();
    const keys = webpush.generateVAPIDKeys();
    const other = webpush.generateVAPIDKeys();
    const config: WebPushConfig = {
      vapidSubject: 'mailto:ops@example.com',
      vapidPublicKey: keys.publicKey,
      vapidPrivateKey: keys.privateKey,
      allowHttpEndpoints: true,
      timeoutMs: 2_000,
    };
    const send = (outcome?: Outcome) => {
      const sub = fake.subscribe(keys.publicKey);
      if (outcome) fake.setOutcome(sub.id, outcome);
      return pushTo(sub);
    };
    return {
      config,
      invalidConfig: { ...config, vapidSubject: 'ops@example.com' },
      wrongCredentials: { ...config, vapidPrivateKey: other.privateKey },
      sends: {
        accepted: send(),
        transient: send({ status: 503 }),
        permanent: send({ status: 413 }),
        rateLimited: send({ status: 429, retryAfter: '7' }),
        deviceGone: send({ status: 410 }),
      },
      rateLimitHintMs: 7_000,
      stop: () => fake.stop(),
    };
  },
};
export default fixture;
