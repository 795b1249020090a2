import {
  sampleMessage,
  type ConformanceFixture,
  type RecipientEventCase,
} from '@ens/plugin-sdk/conformance';
import type { OutboundMessage } from '@ens/plugin-sdk';
import type { SmppConfigInput } from './config.ts';
import { ESME, FakeSmsc, errorRecipient, type MobileOriginated } from './testing/fake-smsc.ts';

const sms = (recipient: string): OutboundMessage =>
  sampleMessage('sms', { recipient, tenantSettings: { sender_id: 'ENS' } });

const SOURCE = '+15005550006';
const TEXTER = '+15557651234';

/**
 * A fake SMSC (src/testing/fake-smsc.ts) that answers by destination, sends a DELIVRD receipt, and
 * delivers mobile-originated STOP and START.
 */
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
      sourceAddr: SOURCE,
    };
    const mo = (
      m: Omit<MobileOriginated, 'from'>,
      name: string,
      recipientReport: RecipientEventCase['recipientReport'],
    ): RecipientEventCase => ({
      name,
      async trigger() {
        await smsc.waitFor(() => smsc.boundCount > 0, 3_000, 'a bound session');
        const status = await smsc.sendMo({ from: TEXTER, ...m });
        if (status !== ESME.ROK) throw new Error(`deliver_sm_resp command_status ${status}`);
      },
      recipientReport,
      withinMs: 500,
    });
    const fromTexter = { address: TEXTER, channel: 'sms' as const };
    return {
      config,
      invalidConfig: { ...config, port: 70_000 },
      wrongCredentials: { ...config, password: 'wrong' },
      sends: {
        accepted: sms('+15550001234'),
        transient: sms(errorRecipient(ESME.RSYSERR)),
        // Invalid source address: the sender's fault, not the recipient's.
        permanent: sms(errorRecipient(ESME.RINVSRCADR)),
        rateLimited: sms(errorRecipient(ESME.RTHROTTLED)),
      },
      recipientRefusals: [
        { send: sms(errorRecipient(ESME.RINVDSTADR)), refusal: 'invalid_recipient' },
      ],
      recipientEvents: [
        mo({ to: SOURCE, text: 'STOP' }, 'an MO STOP to the default source address', {
          kind: 'opt_out',
          ...fromTexter,
          sender: { id: SOURCE, isDefault: true },
        }),
        mo({ to: SOURCE, text: 'Start' }, 'an MO START', {
          kind: 'opt_in',
          ...fromTexter,
          sender: { id: SOURCE, isDefault: true },
        }),
        mo({ to: '12345', text: 'stop', ucs2: true }, 'a UCS-2 MO STOP to a short code', {
          kind: 'opt_out',
          ...fromTexter,
          sender: { id: '+12345', isDefault: false },
        }),
        mo({ to: SOURCE, text: 'What time do you open?' }, 'an MO that is no keyword', null),
      ],
      expectReport: { status: 'delivered', withinMs: 3_000 },
      stop: () => smsc.stop(),
    };
  },
};
export default fixture;
