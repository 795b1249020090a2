import type { OutboundMessage } from '@ens/plugin-sdk';
import type { ConformanceFixture, WebhookCase } from '@ens/plugin-sdk/conformance';
import type { WhatsAppConfig } from './config.ts';
import { FAKE_DEFAULTS, FAKE_RECIPIENTS, FakeGraph } from './testing/fake-graph.ts';

/**
 * Runs the plugin against the local fake Graph API: one send per outcome, and the webhook both
 * ways.
 */

const VERIFY_TOKEN = 'conformance-verify-token';

export const whatsappMessage = (
  recipient: string,
  content: Record<string, unknown> = {},
): OutboundMessage => ({
  deliveryId: '0190a0b0-0000-7000-8000-00000000a0a1',
  attempt: 1,
  channel: 'whatsapp',
  recipient,
  tenant: 'conformance',
  tenantSettings: {},
  eventType: 'conformance.check',
  reference: null,
  content: {
    kind: 'template',
    template_name: 'order_update',
    language: 'en_US',
    body_params: ['Ada', 'A-1001'],
    url_button_suffix: 'A-1001',
    ...content,
  },
});

const fixture: ConformanceFixture<WhatsAppConfig> = {
  async start() {
    const fake = new FakeGraph({ appSecret: 'conformance-app-secret' });
    const graphUrl = await fake.start();
    const config: WhatsAppConfig = {
      accessToken: fake.accessToken,
      phoneNumberId: FAKE_DEFAULTS.phoneNumberId,
      appSecret: fake.appSecret,
      verifyToken: VERIFY_TOKEN,
      graphUrl,
      apiVersion: 'v23.0',
      timeoutMs: 2_000,
    };
    const { accessToken: _missing, ...withoutToken } = config;
    return {
      config,
      invalidConfig: withoutToken,
      wrongCredentials: { ...config, accessToken: 'EAAG-not-the-token' },
      sends: {
        accepted: whatsappMessage('+15551234567'),
        transient: whatsappMessage(`+${FAKE_RECIPIENTS.somethingWrong}`),
        // 131030, not on the test account's allowed list: the operator's to fix, not the
        // recipient's.
        permanent: whatsappMessage(`+${FAKE_RECIPIENTS.notAllowed}`),
        rateLimited: whatsappMessage(`+${FAKE_RECIPIENTS.throughput}`),
      },
      recipientRefusals: [
        {
          send: whatsappMessage(`+${FAKE_RECIPIENTS.undeliverable}`),
          refusal: 'invalid_recipient',
        }, // 131026
        { send: whatsappMessage(`+${FAKE_RECIPIENTS.stoppedMarketing}`), refusal: 'opt_out' }, // 131050
      ],
      webhooks(wamid) {
        const t = Math.floor(Date.now() / 1000);
        const post = (hook: { body: string; headers: Record<string, string> }): WebhookCase => ({
          method: 'POST',
          path: '/webhook',
          headers: hook.headers,
          body: hook.body,
        });
        const delivered = fake.statusWebhook([{ id: wamid, status: 'delivered', timestamp: t }]);
        const forgedBySecret = fake.statusWebhook([{ id: wamid, status: 'read', timestamp: t }], {
          appSecret: 'not-the-app-secret',
        });
        const otherBytes = fake.statusWebhook([{ id: wamid, status: 'failed', timestamp: t }]);
        return {
          genuine: [
            {
              method: 'GET',
              path: `/webhook?hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1158201444`,
              responseBody: '1158201444',
            },
            {
              ...post(delivered),
              report: { status: 'delivered', providerMessageId: wamid, at: new Date(t * 1000) },
            },
            {
              ...post(fake.statusWebhook([{ id: wamid, status: 'read', timestamp: t + 5 }])),
              report: { status: 'read' },
            },
            {
              ...post(
                fake.statusWebhook([
                  { id: wamid, status: 'failed', timestamp: t + 9, errorCode: 131026 },
                ]),
              ),
              report: {
                status: 'failed',
                error: `whatsapp 131026: Message undeliverable (Unable to deliver message. Reasons can include: the recipient phone number is not a WhatsApp phone number.)`,
              },
              recipientReport: { kind: 'invalid_recipient', providerMessageId: wamid },
            },
            {
              ...post(
                fake.statusWebhook([
                  { id: wamid, status: 'failed', timestamp: t + 10, errorCode: 131050 },
                ]),
              ),
              report: { status: 'failed' },
              recipientReport: { kind: 'opt_out', providerMessageId: wamid },
            },
            // The 24-hour window: the message's fault, so nothing about the recipient.
            {
              ...post(
                fake.statusWebhook([
                  { id: wamid, status: 'failed', timestamp: t + 11, errorCode: 131047 },
                ]),
              ),
              report: { status: 'failed' },
              recipientReport: null,
            },
          ],
          forged: [
            {
              method: 'GET',
              path: '/webhook?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1158201444',
            },
            post(forgedBySecret),
            {
              method: 'POST',
              path: '/webhook',
              headers: { 'content-type': 'application/json' },
              body: delivered.body,
            },
            // A signature Meta made for another payload, replayed over different bytes.
            { method: 'POST', path: '/webhook', headers: otherBytes.headers, body: delivered.body },
          ],
        };
      },
      stop: () => fake.stop(),
    };
  },
};
export default fixture;
