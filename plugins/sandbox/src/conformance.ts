import type { ConformanceFixture } from '@ens/plugin-sdk/conformance';
import type { OutboundMessage } from '@ens/plugin-sdk';

/** The sandbox needs no server: its recipients choose the outcome (see the README's table). */
const sms = (recipient: string, attempt = 1): OutboundMessage => ({
  deliveryId: '0190a0b0-0000-7000-8000-000000000001',
  attempt,
  channel: 'sms',
  recipient,
  tenant: 'conformance',
  tenantSettings: {},
  eventType: 'conformance.check',
  reference: null,
  content: { body: 'conformance check' },
});

const fixture: ConformanceFixture = {
  async start() {
    return {
      config: { handsetDelayMs: 10 },
      invalidConfig: { handsetDelayMs: -1 },
      sends: {
        accepted: { ...sms('+15550002222'), channel: 'whatsapp', content: { template: 'conformance', language: 'en', parameters: [] } },
        transient: sms('+15550001111'),
        permanent: sms('+15550000000'),
      },
      expectReport: { status: 'delivered', withinMs: 2_000 },
      async stop() {},
    };
  },
};
export default fixture;
