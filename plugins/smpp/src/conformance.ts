import type { ConformanceFixture } from '@ens/plugin-sdk/conformance';
import type { OutboundMessage } from '@ens/plugin-sdk';
import type { SmppConfigInput } from './config.ts';
import { ESME, FakeSmsc, errorRecipient } from './testing/fake-smsc.ts';

const sms = (recipient: string): OutboundMessage => ({
  deliveryId: '0190a0b0-0000-7000-8000-000000000001',
  attempt: 1,
  channel: 'sms',
  recipient,
  tenant: 'conformance',
  tenantSettings: { sender_id: 'ENS' },
  eventType: 'conformance.check',
  reference: null,
  content: { kind: 'rendered', body: 'conformance check' },
});

/** A fake SMSC (src/testing/fake-smsc.ts) that answers by destination and sends a DELIVRD receipt. */
const fixture: ConformanceFixture<SmppConfigInput> = {
  async start() {
    const smsc = new FakeSmsc({ systemId: 'ens-check', password: 'secret1' });
    const { host, port } = await smsc.start();
    const config: SmppConfigInput = {
      host,
      port,
      systemId: 'ens-check',
      password: 'secret1',
      reconnectMinMs: 50,
      reconnectMaxMs: 200,
      connectTimeoutMs: 2_000,
      submitTimeoutMs: 2_000,
    };
    return {
      config,
      invalidConfig: { ...config, port: 70_000 },
      wrongCredentials: { ...config, password: 'wrong' },
      sends: {
        accepted: sms('+15550001234'),
        transient: sms(errorRecipient(ESME.RSYSERR)),
        permanent: sms(errorRecipient(ESME.RINVDSTADR)),
        rateLimited: sms(errorRecipient(ESME.RTHROTTLED)),
      },
      expectReport: { status: 'delivered', withinMs: 3_000 },
      stop: () => smsc.stop(),
    };
  },
};
export default fixture;
