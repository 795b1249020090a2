import { generateKeyPairSync } from 'node:crypto';
import t from 'tap';
import { checkConfig, classifyError, type OutboundMessage, type Provider } from '@ens/plugin-sdk';
import { recordingContext } from '@ens/plugin-sdk/conformance';
import plugin, { type SmtpConfig } from '../src/index.ts';
import { classifySmtpError } from '../src/error-classes.ts';
import {
  SmtpTestServer,
  TEST_CA_PEM,
  type ReceivedMessage,
} from '../src/testing/smtp-test-server.ts';
import { verifyDkim } from './dkim-verify.ts';

/*
 * What the plugin does for consent (SDK 1.3), over real SMTP conversations with the test relay:
 * the delivery's signed return path as the envelope sender, RFC 8058 one-click unsubscribe headers
 * (DKIM-signed), and refusals at RCPT TO that are about the address marked as recipient refusals.
 */

const USER = 'relay-user';
const PASS = 'consent-relay-pass';

const relay = new SmtpTestServer({ users: { [USER]: PASS } });
const { host, port } = await relay.start();
t.teardown(() => relay.stop());

const baseConfig: SmtpConfig = {
  host,
  port,
  auth: { user: USER, pass: PASS },
  tls: { ca: TEST_CA_PEM },
  fromAddress: 'news@acme.example',
  fromName: 'ACME News',
  timeoutMs: 3_000,
};

let seq = 0;
function message(over: Partial<OutboundMessage> = {}): OutboundMessage {
  seq++;
  return {
    deliveryId: `0190a0b0-0000-7000-8000-${String(seq).padStart(12, '0')}`,
    attempt: 1,
    channel: 'email',
    recipient: `reader${seq}@example.org`,
    tenant: 'acme',
    tenantSettings: {},
    eventType: 'newsletter.weekly',
    reference: null,
    content: { kind: 'rendered', subject: 'This week', body: 'Plain text', html: '<p>HTML</p>' },
    ...over,
  };
}

async function provider(
  tt: { teardown(fn: () => unknown): void },
  over: Partial<SmtpConfig> = {},
): Promise<Provider> {
  const pv = await plugin.create(
    checkConfig('@ens/plugin-smtp', plugin, { ...baseConfig, ...over }) as SmtpConfig,
    recordingContext(),
  );
  tt.teardown(() => pv.close?.());
  return pv;
}

async function failure(p: Promise<unknown>) {
  try {
    await p;
  } catch (e) {
    if (e === null || typeof e !== 'object' || !('ensErrorKind' in e))
      throw new Error(`unclassified error: ${String(e)}`, { cause: e });
    return classifyError(e);
  }
  throw new Error('the send resolved where it should have failed');
}

const forRecipient = (r: string) => (m: ReceivedMessage) => m.envelope.rcptTo.includes(r);
const RETURN_PATH = 'bq3pmrmwuaaaahaaaaaaaaaaaaaaaaaaqcbtpgybklrf@bounces.acme.example';
const UNSUBSCRIBE = {
  url: 'https://ens.acme.example/unsubscribe/uq3pmrmwuaaaahaaaaaaaaaaaaaaaaaaqcbtpgybklrf',
  mailto:
    'mailto:uq3pmrmwuaaaahaaaaaaaaaaaaaaaaaaqcbtpgybklrf@bounces.acme.example?subject=unsubscribe',
};

t.test(
  'the return path is the envelope sender; the From header stays the configured one',
  async (t) => {
    const pv = await provider(t);
    const m = message({ returnPath: RETURN_PATH });
    await pv.send(m);
    const got = await relay.waitForMessage(forRecipient(m.recipient));
    t.same(
      got.envelope,
      { mailFrom: RETURN_PATH, rcptTo: [m.recipient] },
      'MAIL FROM is the return path, RCPT TO the recipient alone',
    );
    t.same(got.from, [{ address: 'news@acme.example', name: 'ACME News' }], 'From is unchanged');
    t.equal(
      got.headers['return-path'],
      undefined,
      'no Return-Path header: the receiving MTA writes it from MAIL FROM',
    );

    const tenant = message({
      returnPath: RETURN_PATH,
      tenantSettings: { from_address: 'letters@shop.example' },
    });
    await pv.send(tenant);
    const got2 = await relay.waitForMessage(forRecipient(tenant.recipient));
    t.equal(got2.envelope.mailFrom, RETURN_PATH, "with a tenant's From address too");
    t.same(
      got2.from.map((f) => f.address),
      ['letters@shop.example'],
    );

    const plain = message();
    await pv.send(plain);
    const got3 = await relay.waitForMessage(forRecipient(plain.recipient));
    t.equal(
      got3.envelope.mailFrom,
      'news@acme.example',
      'without a return path, MAIL FROM is the From address',
    );
  },
);

t.test(
  'one-click unsubscribe: List-Unsubscribe with the https URL and the mailto, and ' +
    'List-Unsubscribe-Post',
  async (t) => {
    const pv = await provider(t);
    const m = message({ unsubscribe: UNSUBSCRIBE });
    await pv.send(m);
    const got = await relay.waitForMessage(forRecipient(m.recipient));
    t.equal(
      got.headers['list-unsubscribe'],
      `<${UNSUBSCRIBE.url}>, <${UNSUBSCRIBE.mailto}>`,
      'both URIs, in angle brackets, https first',
    );
    t.equal(
      got.headers['list-unsubscribe-post'],
      'List-Unsubscribe=One-Click',
      'RFC 8058 one-click',
    );

    const noMailto = message({ unsubscribe: { url: UNSUBSCRIBE.url, mailto: null } });
    await pv.send(noMailto);
    const got2 = await relay.waitForMessage(forRecipient(noMailto.recipient));
    t.equal(
      got2.headers['list-unsubscribe'],
      `<${UNSUBSCRIBE.url}>`,
      'without a return-path domain: the URL alone',
    );
    t.equal(got2.headers['list-unsubscribe-post'], 'List-Unsubscribe=One-Click');

    const transactional = message();
    await pv.send(transactional);
    const got3 = await relay.waitForMessage(forRecipient(transactional.recipient));
    t.equal(
      got3.headers['list-unsubscribe'],
      undefined,
      'no unsubscribe given (not a bulk event type): no List-Unsubscribe',
    );
    t.equal(got3.headers['list-unsubscribe-post'], undefined);
  },
);

t.test('DKIM covers List-Unsubscribe and List-Unsubscribe-Post (RFC 8058 section 4)', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const dkim = {
    domainName: 'acme.example',
    keySelector: 'news',
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
  const pv = await provider(t, { dkim });
  const m = message({ returnPath: RETURN_PATH, unsubscribe: UNSUBSCRIBE });
  await pv.send(m);
  const got = await relay.waitForMessage(forRecipient(m.recipient));
  const v = verifyDkim(got.raw, publicKey);
  t.ok(v.ok, `the signature verifies over the received bytes (${v.reason})`);
  const signed = (v.tags.h ?? '').toLowerCase().split(':');
  t.ok(signed.includes('list-unsubscribe'), `h= names List-Unsubscribe (${v.tags.h})`);
  t.ok(signed.includes('list-unsubscribe-post'), 'h= names List-Unsubscribe-Post');
  const raw = got.raw.toString('latin1');
  const swapped = Buffer.from(
    raw.replace(UNSUBSCRIBE.url, 'https://elsewhere.example/unsubscribe/x'),
    'latin1',
  );
  t.not(swapped.toString('latin1'), raw, 'the URL was in the raw message to replace');
  t.notOk(verifyDkim(swapped, publicKey).ok, 'a changed List-Unsubscribe breaks the signature');
  const unposted = Buffer.from(
    raw.replace('List-Unsubscribe=One-Click', 'List-Unsubscribe=Two-Clicks'),
    'latin1',
  );
  t.notOk(
    verifyDkim(unposted, publicKey).ok,
    'a changed List-Unsubscribe-Post breaks the signature',
  );
});

t.test(
  'a return path or unsubscribe URI that cannot be written is refused before any SMTP',
  async (t) => {
    const pv = await provider(t);
    const before = relay.received.length;
    const a = await failure(pv.send(message({ returnPath: 'not an address' })));
    t.match(a, {
      kind: 'permanent',
      message: 'smtp: the return path "not an address" is not an email address',
    });
    const b = await failure(
      pv.send(
        message({
          unsubscribe: { url: 'https://ens.example/u/x>, <https://evil.example/', mailto: null },
        }),
      ),
    );
    t.match(
      b,
      { kind: 'permanent', message: /cannot be written into List-Unsubscribe/ },
      'a URI that would close its bracket',
    );
    const c = await failure(
      pv.send(
        message({
          unsubscribe: { url: 'https://ens.example/u/x\r\nBcc: x@evil.example', mailto: null },
        }),
      ),
    );
    t.match(
      c,
      { kind: 'permanent', message: /cannot be written into List-Unsubscribe/ },
      'a URI with a line break',
    );
    t.equal(relay.received.length, before, 'nothing reached the relay');
  },
);

t.test(
  'refusals at RCPT TO about the address are recipient refusals; others are not',
  async (t) => {
    const pv = await provider(t);
    const cases: [string, 'permanent' | 'transient', string | undefined, string][] = [
      ['reject-550@example.org', 'permanent', 'hard_bounce', 'Postfix 550 5.1.1 user unknown'],
      ['nomx-550-5.1.10@example.org', 'permanent', 'hard_bounce', '5.1.10 null MX (RFC 7505)'],
      [
        'nodomain-550-5.1.2@example.org',
        'permanent',
        'invalid_recipient',
        '5.1.2 bad destination system',
      ],
      ['mbx-553@example.org', 'permanent', 'invalid_recipient', '553 5.1.3 bad address syntax'],
      [
        'relay-554@example.org',
        'permanent',
        undefined,
        '554 5.7.1 relay denied: about the sender, no suppression',
      ],
      ['blocked-550-5.7.1@example.org', 'permanent', undefined, '550 5.7.1 policy: no suppression'],
      ['moved-551@example.org', 'permanent', undefined, '551 5.1.6 user not local: no suppression'],
      ['grey-450-4.1.1@example.org', 'transient', undefined, '450 4.1.1: a 4xx is never a refusal'],
      ['limit-552@example.org', 'transient', undefined, '552 to RCPT is 452'],
    ];
    for (const [recipient, kind, refusal, why] of cases) {
      const f = await failure(pv.send(message({ recipient, returnPath: RETURN_PATH })));
      t.equal(f.kind, kind, `${recipient}: ${kind} (${why})`);
      t.equal(
        f.recipientRefusal,
        refusal,
        `${recipient}: recipientRefusal ${String(refusal)} — ${f.message}`,
      );
      t.match(f.message, /^smtp [45]\d\d /, "the message is the relay's reply");
    }
    await relay.waitUntil(
      () =>
        relay.rejections.filter((r) => cases.some(([c]) => c === r.address)).length ===
        cases.length,
    );
    t.ok(
      cases.every(([c]) => relay.rejections.some((r) => r.address === c && r.stage === 'rcpt')),
      'each was refused by the relay at RCPT TO',
    );
  },
);

t.test('classification reads the enhanced code of the reply, and only at RCPT TO', async (t) => {
  const cls = (err: object) => classifyError(classifySmtpError(Object.assign(new Error('x'), err)));
  t.equal(
    cls({
      code: 'EENVELOPE',
      response:
        '550-5.1.1 The email account that you tried to reach does not exist.\n550 5.1.1 ' +
        'https://support.google.com/mail/?p=NoSuchUser',
      responseCode: 550,
      command: 'RCPT TO',
    }).recipientRefusal,
    'hard_bounce',
    "Gmail's multi-line 550-5.1.1",
  );
  t.equal(
    cls({
      code: 'EENVELOPE',
      response:
        '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup',
      responseCode: 550,
      command: 'RCPT TO',
    }).recipientRefusal,
    'hard_bounce',
    "Microsoft 365's 5.1.10",
  );
  t.equal(
    cls({
      code: 'EENVELOPE',
      response: '550 5.1.1 <a@b.example>: Sender address rejected: unknown user',
      responseCode: 550,
      command: 'MAIL FROM',
    }).recipientRefusal,
    undefined,
    '5.1.1 to MAIL FROM is about the sender',
  );
  t.equal(
    cls({
      code: 'EMESSAGE',
      response: '550 5.1.1 mailbox unavailable',
      responseCode: 550,
      command: 'DATA',
    }).recipientRefusal,
    undefined,
    'after DATA: not marked',
  );
  t.equal(
    cls({ code: 'EENVELOPE', response: '550 User unknown', responseCode: 550, command: 'RCPT TO' })
      .recipientRefusal,
    undefined,
    'no enhanced code: not marked',
  );
  t.equal(
    cls({
      code: 'EENVELOPE',
      response: '550 5.1.11 something new',
      responseCode: 550,
      command: 'RCPT TO',
    }).recipientRefusal,
    undefined,
    '5.1.11 is not 5.1.1',
  );
});
