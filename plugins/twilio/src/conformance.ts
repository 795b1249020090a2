import type { OutboundMessage } from '@ens/plugin-sdk';
import {
  sampleMessage,
  type ConformanceFixture,
  type WebhookCase,
} from '@ens/plugin-sdk/conformance';
import type { TwilioConfig } from './config.ts';
import { FakeTwilio, type InboundSms } from './testing/fake-twilio.ts';

/**
 * The public URLs Twilio would call; the plugin checks signatures against them whatever URL the
 * request arrives on.
 */
const STATUS_URL = 'https://ens.example.com/webhooks/twilio/status';
const INBOUND_URL = 'https://ens.example.com/webhooks/twilio/inbound';
const FROM = '+15005550006';
const TEXTER = '+15557650001';

const sms = (recipient: string): OutboundMessage =>
  sampleMessage('sms', { deliveryId: '0190a0b0-0000-7000-8000-000000000071', recipient });

function callback(
  fake: FakeTwilio,
  params: Record<string, string>,
  signWith?: string,
): WebhookCase {
  return {
    method: 'POST',
    path: '/status',
    url: STATUS_URL,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': fake.sign(STATUS_URL, params, signWith),
    },
    body: new URLSearchParams(params).toString(),
  };
}

/** An SMS texted to one of the account's numbers, as Twilio posts it to the inbound route. */
function inbound(fake: FakeTwilio, sms: InboundSms, signWith?: string): WebhookCase {
  const params = fake.inboundParams(sms);
  return {
    method: 'POST',
    path: '/inbound',
    url: INBOUND_URL,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': fake.sign(INBOUND_URL, params, signWith),
    },
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
      from: FROM,
      statusCallbackUrl: STATUS_URL,
      inboundUrl: INBOUND_URL,
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
        // 21408, region not enabled: the account's fault, not the recipient's.
        permanent: sms('+15550000002'),
        rateLimited: sms('+15550000429'),
      },
      recipientRefusals: [
        { send: sms('+15550000000'), refusal: 'invalid_recipient' }, // 21211
        { send: sms('+15550000003'), refusal: 'invalid_recipient' }, // 21614
        { send: sms('+15550000001'), refusal: 'opt_out' }, // 21610
      ],
      rateLimitHintMs: 7_000,
      webhooks(sid) {
        const delivered = fake.statusParams(sid, 'delivered');
        const tampered = { ...delivered, MessageSid: `SM${'0'.repeat(32)}` };
        const unsigned = {
          ...callback(fake, delivered),
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        };
        const tamperedCase = {
          ...callback(fake, delivered),
          body: new URLSearchParams(tampered).toString(),
        };
        const stop = { from: TEXTER, to: FROM, body: 'STOP' };
        const toDefault = {
          address: TEXTER,
          channel: 'sms' as const,
          sender: { id: FROM, isDefault: true },
        };
        return {
          genuine: [
            callback(fake, fake.statusParams(sid, 'sent')),
            { ...callback(fake, delivered), report: { status: 'delivered' } },
            { ...callback(fake, fake.statusParams(sid, 'read')), report: { status: 'read' } },
            {
              ...callback(fake, fake.statusParams(sid, 'undelivered', { errorCode: 30003 })),
              report: { status: 'failed', error: 'twilio: undelivered (error 30003)' },
            },
            { ...inbound(fake, stop), recipientReport: { kind: 'opt_out', ...toDefault } },
            {
              ...inbound(fake, { ...stop, body: 'start' }),
              recipientReport: { kind: 'opt_in', ...toDefault },
            },
            // Advanced Opt-Out's own (localised) keyword, read from OptOutType.
            {
              ...inbound(fake, { ...stop, to: '+15005550007', body: 'Arrêt', optOutType: 'STOP' }),
              recipientReport: {
                kind: 'opt_out',
                address: TEXTER,
                sender: { id: '+15005550007', isDefault: false },
              },
            },
            { ...inbound(fake, { ...stop, body: 'HELP' }), recipientReport: null },
            {
              ...inbound(fake, { ...stop, body: 'Please stop texting me at night' }),
              recipientReport: null,
            },
          ],
          forged: [
            callback(fake, delivered, 'not-the-auth-token'),
            unsigned,
            tamperedCase,
            inbound(fake, stop, 'not-the-auth-token'),
            {
              ...inbound(fake, stop),
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
            },
            // Signed for another texter, replayed with this one.
            {
              ...inbound(fake, { ...stop, from: '+15557650002' }),
              body: new URLSearchParams(fake.inboundParams(stop)).toString(),
            },
          ],
        };
      },
      stop: () => fake.stop(),
    };
  },
};
export default fixture;
