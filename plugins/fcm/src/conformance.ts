import type { OutboundMessage } from '@ens/plugin-sdk';
import { sampleMessage, type ConformanceFixture } from '@ens/plugin-sdk/conformance';
import type { FcmConfig } from './config.ts';
import { deviceToken, FakeFcm, type FcmOutcome } from './testing/fake-fcm.ts';

/** A push send to one FCM device of the fake; the token's prefix chooses the fake's answer. */
export function pushTo(token: string, over: Partial<OutboundMessage> = {}): OutboundMessage {
  return sampleMessage('push', {
    deliveryId: '0190a0b0-0000-7000-8000-0000000000fc',
    content: {
      kind: 'rendered',
      subject: 'Conformance',
      body: 'conformance check',
      data: { order: '1234' },
    },
    device: { token, platform: 'fcm', subscription: null },
    ...over,
  });
}

const QUOTA_RETRY_AFTER_S = 7;

const fixture: ConformanceFixture<FcmConfig> = {
  async start() {
    const fake = new FakeFcm();
    const baseUrl = await fake.start();
    fake.quotaRetryAfterSec = QUOTA_RETRY_AFTER_S;
    const serviceAccount = fake.serviceAccount({ projectId: 'ens-conformance' });
    const to = (o?: FcmOutcome) => pushTo(deviceToken(o));
    return {
      config: { serviceAccount, baseUrl, timeoutMs: 5_000 },
      // A key file without its private key cannot sign anything.
      invalidConfig: { serviceAccount: { ...serviceAccount, private_key: undefined }, baseUrl },
      wrongCredentials: {
        serviceAccount: fake.untrustedServiceAccount(serviceAccount),
        baseUrl,
        timeoutMs: 5_000,
      },
      sends: {
        accepted: to(),
        transient: to('unavailable'),
        permanent: to('invalid-argument'),
        rateLimited: to('quota-exceeded'),
        deviceGone: to('unregistered'),
      },
      rateLimitHintMs: QUOTA_RETRY_AFTER_S * 1000,
      stop: () => fake.stop(),
    };
  },
};
export default fixture;
