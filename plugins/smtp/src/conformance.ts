import type { OutboundMessage } from '@ens/plugin-sdk';
import type { ConformanceFixture } from '@ens/plugin-sdk/conformance';
import type { SmtpConfig } from './config.ts';
import { SmtpTestServer, TEST_CA_PEM } from './testing/smtp-test-server.ts';

/**
 * Runs the kit against a real SMTP conversation: the test relay in its own process, with
 * STARTTLS (verified against the test CA, requireTLS on as in production) and AUTH.
 * The recipient's local part picks the relay's answer (see smtp-test-server.ts).
 */
const USER = 'ens-conformance';
const PASS = 'correct horse battery staple';
const LOGO = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201f0a4d2a70000000049454e44ae426082',
  'hex',
);

const email = (recipient: string): OutboundMessage => ({
  deliveryId: '0190a0b0-0000-7000-8000-00000000e001',
  attempt: 1,
  channel: 'email',
  recipient,
  tenant: 'conformance',
  tenantSettings: {},
  eventType: 'conformance.check',
  reference: null,
  content: {
    kind: 'rendered',
    subject: 'Conformance check',
    body: 'conformance check',
    html: '<p>conformance check <img src="cid:logo" alt=""></p>',
    inline_images: [{ cid: 'logo', media_type: 'image/png', storage_key: 'conformance/logo.png' }],
  },
});

const fixture: ConformanceFixture<SmtpConfig> = {
  async start() {
    const server = new SmtpTestServer({ users: { [USER]: PASS } });
    const { host, port } = await server.start();
    const config: SmtpConfig = {
      host,
      port,
      auth: { user: USER, pass: PASS },
      tls: { ca: TEST_CA_PEM },
      fromAddress: 'notifications@ens.example',
      fromName: 'ENS conformance',
      timeoutMs: 5_000,
    };
    return {
      config,
      invalidConfig: { ...config, fromAddress: 'not an address' },
      wrongCredentials: { ...config, auth: { user: USER, pass: 'wrong password' } },
      sends: {
        accepted: email('someone@example.org'),
        transient: email('defer-451@example.org'),
        // 554 5.7.1 relay access denied: permanent, and about the message, not the recipient.
        permanent: email('relay-554@example.org'),
        // SMTP relays throttle in words, not codes (Amazon SES's 454), and give no retry hint.
        rateLimited: email('throttle-454@example.org'),
      },
      // 550 5.1.1 unknown user and 553 5.1.3 bad address syntax, refused at RCPT TO.
      recipientRefusals: [
        { send: email('reject-550@example.org'), refusal: 'hard_bounce' },
        { send: email('mbx-553@example.org'), refusal: 'invalid_recipient' },
      ],
      media: { 'conformance/logo.png': { bytes: LOGO, mediaType: 'image/png' } },
      stop: () => server.stop(),
    };
  },
};
export default fixture;
