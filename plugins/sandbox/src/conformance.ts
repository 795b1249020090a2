import { sampleMessage, type ConformanceFixture } from '@ens/plugin-sdk/conformance';

/** The sandbox needs no server: its recipients choose the outcome (see the README's table). */
const fixture: ConformanceFixture = {
  async start() {
    return {
      config: { handsetDelayMs: 10 },
      invalidConfig: { handsetDelayMs: -1 },
      sends: {
        // A whatsapp number ending 2222: sent, then the simulated handset reports delivered.
        accepted: sampleMessage('whatsapp', { recipient: '+15550002222' }),
        transient: sampleMessage('sms', { recipient: '+15550001111' }),
        permanent: sampleMessage('sms', { recipient: '+15550000000' }),
      },
      expectReport: { status: 'delivered', withinMs: 2_000 },
      async stop() {},
    };
  },
};
export default fixture;
