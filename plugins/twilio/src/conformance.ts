import type { OutboundMessage } from '@ens/plugin-sdk';
import { sampleMessage, type ConformanceFixture, type WebhookCase } from '@ens/plugin-sdk/conformance';
import type { TwilioConfig } from './config.ts';
import { FakeTwilio } from './testing/fake-twilio.ts';

/** The public URL Twilio would call; the plugin signs against it whatever URL the request arrives on. */
const STATUS_URL = 'https://ens.example.com/webhooks/twilio/status';

const sms = (recipient: string): OutboundMessage => sampleMessage('sms', { deliveryId: '0190a0b0-0000-7000-8000-000000000071', recipient });

function callback(fake: FakeTwilio, params: Record<string, string>, signWith?: string): WebhookCase {
  return {
    method: 'POST',
    path: '/status',
    url: STATUS_URL,
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': fake.sign(STATUS_URL, params, signWith) },
    body: new URLSearchParams(params).toString(),
  };
}

/** Starts a FakeTwilio; its To-number table gives each outcome (see src/testing/fake-twilio.ts). */
const fixture: ConformanceFixture<TwilioConfig> = {
  async start() {
    const fake = new FakeTwilio();
    const baseUrl = await fake.start();
    const config: TwilioConfig = {
      accountSid: fake.accountSid,
      authToken: fake.authToken,
      from: '+15005550006',
      statusCallbackUrl: STATUS_URL,
      baseUrl,
      timeoutMs: 5_000,
    };
    return {
      config,
      invalidConfig: { ...config, accountSid: 'not-an-account-sid' },
      wrongCredentials: { ...config, authToken: 'f'.repeat(32) },
      sends: {
        accepted: sms('+15557654321'),
        transient: sms('+15550000500'),
        permanent: sms('+15550000000'),
        rateLimited: sms('+15550000429'),
      },
      rateLimitHintMs: 7_000,
      webhooks(sid) {
        const delivered = fake.statusParams(sid, 'delivered');
        const tampered = { ...delivered, MessageSid: `SM${'0'.repeat(32)}` };
        const unsigned = { ...callback(fake, delivered), headers: { 'content-type': 'application/x-www-form-urlencoded' } };
        const tamperedCase = { ...callback(fake, delivered), body: new URLSearchParams(tampered).toString() };
        return {
          genuine: [
            callback(fake, fake.statusParams(sid, 'sent')),
            { ...callback(fake, delivered), report: { status: 'delivered' } },
            { ...callback(fake, fake.statusParams(sid, 'read')), report: { status: 'read' } },
            { ...callback(fake, fake.statusParams(sid, 'undelivered', { errorCode: 30003 })), report: { status: 'failed', error: 'twilio: undelivered (error 30003)' } },
          ],
          forged: [callback(fake, delivered, 'not-the-auth-token'), unsigned, tamperedCase],
        };
      },
      stop: () => fake.stop(),
    };
  },
};
export default fixture;
