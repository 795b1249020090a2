import { sampleMessage, type ConformanceFixture } from '@ens/plugin-sdk/conformance';
import type { OutboundMessage } from '@ens/plugin-sdk';
import type { SmppConfigInput } from './config.ts';
import { ESME, FakeSmsc, errorRecipient } from './testing/fake-smsc.ts';

const sms = (recipient: string): OutboundMessage => sampleMessage('sms', { recipient, tenantSettings: { sender_id: 'ENS' } });

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
