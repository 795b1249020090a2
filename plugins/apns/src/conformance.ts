import type { OutboundMessage } from '@ens/plugin-sdk';
import { sampleMessage, type ConformanceFixture } from '@ens/plugin-sdk/conformance';
import type { ApnsConfig } from './config.ts';
import {
  fakeDeviceToken,
  generateApnsKey,
  startFakeApns,
  type FakeAnswer,
} from './testing/fake-apns.ts';

/** A push to one device whose token makes the fake answer `answer` (see fakeDeviceToken). */
const push = (answer: FakeAnswer, n: number): OutboundMessage =>
  sampleMessage('push', {
    deliveryId: `0190a0b0-0000-7000-8000-0000000000${String(n).padStart(2, '0')}`,
    content: {
      kind: 'rendered',
      subject: 'Conformance',
      body: 'conformance check',
      data: { order: '42' },
    },
    device: { token: fakeDeviceToken(answer), platform: 'apns', subscription: null },
  });

const fixture: ConformanceFixture<ApnsConfig> = {
  async start() {
    const { fake, config } = await startFakeApns();
    return {
      config,
      invalidConfig: { ...config, teamId: 'not-a-team' },
      // Same team and key id, another key: APNs cannot verify the signature (403
      // InvalidProviderToken).
      wrongCredentials: { ...config, privateKey: generateApnsKey().privateKey },
      sends: {
        accepted: push('ok', 1),
        transient: push('ServiceUnavailable', 2),
        permanent: push('DeviceTokenNotForTopic', 3),
        rateLimited: push('TooManyRequests', 4),
        deviceGone: push('Unregistered', 5),
      },
      stop: () => fake.stop(),
    };
  },
};
export default fixture;
