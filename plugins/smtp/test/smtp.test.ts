import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import t from 'tap';
import { checkConfig, classifyError, type OutboundMessage, type Provider } from '@ens/plugin-sdk';
import {
  conformanceTest,
  recordingContext,
  type RecordingContext,
} from '@ens/plugin-sdk/conformance';
import plugin, { type SmtpConfig } from '../src/index.ts';
import fixture from '../src/conformance.ts';
import { classifySmtpError, replyText } from '../src/error-classes.ts';
import {
  SmtpTestServer,
  TEST_CA_PEM,
  type ReceivedMessage,
} from '../src/testing/smtp-test-server.ts';
import { verifyDkim } from './dkim-verify.ts';

const USER = 'relay-user';
const PASS = 's3cret-relay-pass';

const relay = new SmtpTestServer({ users: { [USER]: PASS } });
const { host, port } = await relay.start();
t.teardown(() => relay.stop());

const baseConfig: SmtpConfig = {
  host,
  port,
  auth: { user: USER, pass: PASS },
  tls: { ca: TEST_CA_PEM },
  fromAddress: 'notifications@ens.example',
  fromName: 'ENS Notifications',
  timeoutMs: 3_000,
};

let seq = 0;
function message(
  over: Partial<OutboundMessage> = {},
  content: Record<string, unknown> = {},
): OutboundMessage {
  seq++;
  return {
    deliveryId: `0190a0b0-0000-7000-8000-${String(seq).padStart(12, '0')}`,
    attempt: 1,
    channel: 'email',
    recipient: `user${seq}@example.org`,
    tenant: 'acme',
    tenantSettings: {},
    eventType: 'order.shipped',
    reference: null,
    content: {
      kind: 'rendered',
      subject: 'Your order shipped',
      body: 'Plain text body',
      html: '<p>HTML body</p>',
      ...content,
    },
    ...over,
  };
}

type TapT = { teardown(fn: () => unknown): void };

async function provider(
  tt: TapT,
  over: Partial<SmtpConfig> = {},
  media: Record<string, { bytes: Buffer; mediaType: string }> = {},
): Promise<{ pv: Provider; ctx: RecordingContext }> {
  const ctx = recordingContext(media);
  const config = checkConfig('@ens/plugin-smtp', plugin, { ...baseConfig, ...over }) as SmtpConfig;
  const pv = await plugin.create(config, ctx);
  tt.teardown(() => pv.close?.());
  return { pv, ctx };
}

/**
 * The classification of a failed send; resolving is a test failure, and so is an unclassified
 * throw.
 */
async function failure(p: Promise<unknown>): Promise<{ kind: string; message: string }> {
  try {
    await p;
  } catch (e) {
    if (e === null || typeof e !== 'object' || !('ensErrorKind' in e))
      throw new Error(`unclassified error: ${String(e)}`, { cause: e });
    const c = classifyError(e);
    return { kind: c.kind, message: c.message };
  }
  throw new Error('the send resolved where it should have failed');
}

const forRecipient = (r: string) => (m: ReceivedMessage) => m.envelope.rcptTo.includes(r);

/** A minimal MIME walker: the tree of Content-Types, to see how the parts nest. */
interface MimePart {
  type: string;
  headers: string;
  parts: MimePart[];
}
function mimeTree(raw: string): MimePart {
  const split = raw.indexOf('\r\n\r\n');
  const headers = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
  const body = raw.slice(split + 4);
  const ct = /^content-type:\s*([^;\r\n]+)(.*)$/im.exec(headers);
  const type = (ct?.[1] ?? 'text/plain').trim().toLowerCase();
  const boundary = /boundary="?([^";\r\n]+)"?/i.exec(ct?.[2] ?? '')?.[1];
  if (!type.startsWith('multipart/') || !boundary) return { type, headers, parts: [] };
  const chunks = body.split(`--${boundary}`).slice(1);
  const parts = chunks
    .filter((c) => !c.startsWith('--'))
    .map((c) => mimeTree(c.replace(/^\r\n/, '')));
  return { type, headers, parts };
}

t.test('config schema: defaults, required fields, unknown keys', async (t) => {
  const c = checkConfig('@ens/plugin-smtp', plugin, {
    host: 'smtp.example.com',
    fromAddress: 'a@example.com',
  }) as SmtpConfig;
  t.equal(c.port, 587, 'port defaults to 587 (submission)');
  t.equal(c.secure, false, 'secure (implicit TLS) defaults to false');
  t.equal(c.requireTLS, true, 'requireTLS defaults to true');
  t.equal(c.pool, true, 'pool defaults to true');
  t.equal(c.maxConnections, 5);
  t.equal(c.timeoutMs, 30_000);
  t.equal(c.sendTimeoutMs, 60_000);
  t.throws(
    () => checkConfig('@ens/plugin-smtp', plugin, { fromAddress: 'a@example.com' }),
    /config \/ must have required properties host/,
    'host is required',
  );
  t.throws(
    () =>
      checkConfig('@ens/plugin-smtp', plugin, { host: 'h', fromAddress: 'Name <a@example.com>' }),
    /config \/fromAddress/,
    'fromAddress is a bare address',
  );
  t.throws(
    () =>
      checkConfig('@ens/plugin-smtp', plugin, {
        host: 'h',
        fromAddress: 'a@example.com',
        auth: { user: 'u' },
      }),
    /config \/auth/,
    'auth needs a pass',
  );
  t.throws(
    () =>
      checkConfig('@ens/plugin-smtp', plugin, {
        host: 'h',
        fromAddress: 'a@example.com',
        tls: { rejectUnauthorised: false },
      }),
    /config \/tls\/rejectUnauthorised is not a setting/,
    'a misspelt nested key stops the start',
  );
  t.throws(
    () =>
      plugin.create(
        {
          host: 'h',
          fromAddress: 'a@example.com',
          dkim: { domainName: 'example.com', keySelector: 's', privateKey: 'not a key' },
        },
        recordingContext(),
      ),
    /dkim\.privateKey is not a PEM private key/,
    'a DKIM key that cannot sign fails the start',
  );
  const ctx = recordingContext();
  const pv = await plugin.create({ host: 'h', port: 465, fromAddress: 'a@example.com' }, ctx);
  await pv.close?.();
  t.match(
    ctx.logs,
    [{ level: 'warn', msg: /port 465 expects implicit TLS/ }],
    'port 465 without secure is warned about',
  );
});

t.test(
  'text + html message arrives over STARTTLS with AUTH, plugin From, headers and Message-ID',
  async (t) => {
    const { pv, ctx } = await provider(t);
    const m = message();
    const authBefore = relay.authAttempts.length;
    const r = await pv.send(m);
    t.equal(
      r.providerMessageId,
      `<${m.deliveryId}@ens.example>`,
      'the provider message id is the Message-ID ENS set',
    );
    const got = await relay.waitForMessage(forRecipient(m.recipient));
    t.same(
      got.envelope,
      { mailFrom: 'notifications@ens.example', rcptTo: [m.recipient] },
      'envelope: MAIL FROM the From address, RCPT TO the recipient',
    );
    t.equal(got.user, USER, 'the session authenticated as the configured user');
    t.equal(got.secure, true, 'the session was upgraded with STARTTLS before AUTH and DATA');
    await relay.waitUntil(() => relay.authAttempts.length > authBefore);
    t.same(
      relay.authAttempts.slice(authBefore),
      [{ method: 'PLAIN', user: USER, ok: true }],
      'one AUTH PLAIN with the configured credentials',
    );
    t.same(
      got.from,
      [{ address: 'notifications@ens.example', name: 'ENS Notifications' }],
      'From: the plugin default name and address',
    );
    t.same(got.to, [{ address: m.recipient, name: '' }]);
    t.equal(got.subject, 'Your order shipped');
    t.equal(got.text, 'Plain text body');
    t.equal(got.html, '<p>HTML body</p>');
    t.equal(got.messageId, r.providerMessageId, 'Message-ID header = provider message id');
    t.equal(got.headers['x-ens-delivery-id'], m.deliveryId);
    t.equal(got.headers['x-ens-event-type'], 'order.shipped');
    t.match(
      got.headers['content-type'],
      /^multipart\/alternative;/,
      'text and html as multipart/alternative',
    );
    t.same(got.replyTo, [], 'no Reply-To unless configured');
    t.match(
      ctx.logs,
      [{ level: 'info', obj: { deliveryId: m.deliveryId, relayResponse: /^250 .*queued as/ } }],
      "the relay's queue id is logged for tracing",
    );
    t.notMatch(JSON.stringify(ctx.logs), PASS, 'the password is never logged');
  },
);

t.test('tenant settings override From address, From name and Reply-To', async (t) => {
  const { pv } = await provider(t, { replyTo: 'support@ens.example' });
  const m = message({
    tenantSettings: {
      from_address: 'orders@acme.example',
      from_name: 'ACME Orders',
      reply_to: 'help@acme.example',
    },
  });
  const r = await pv.send(m);
  t.equal(
    r.providerMessageId,
    `<${m.deliveryId}@acme.example>`,
    "the Message-ID carries the tenant's domain",
  );
  const got = await relay.waitForMessage(forRecipient(m.recipient));
  t.same(got.from, [{ address: 'orders@acme.example', name: 'ACME Orders' }]);
  t.equal(got.envelope.mailFrom, 'orders@acme.example');
  t.same(got.replyTo, [{ address: 'help@acme.example', name: '' }]);

  const m2 = message({ tenantSettings: { from_address: 'billing@acme.example' } });
  await pv.send(m2);
  const got2 = await relay.waitForMessage(forRecipient(m2.recipient));
  t.same(
    got2.from,
    [{ address: 'billing@acme.example', name: 'ENS Notifications' }],
    'each setting overrides its own default only',
  );
  t.same(
    got2.replyTo,
    [{ address: 'support@ens.example', name: '' }],
    'the plugin Reply-To applies when the tenant sets none',
  );
});

t.test(
  'inline images arrive as multipart/related parts whose Content-ID matches the html cid:',
  async (t) => {
    const logo = randomBytes(3_000);
    const chart = randomBytes(5_000);
    const media = {
      'tenant/acme/logo': { bytes: logo, mediaType: 'image/png' },
      'tenant/acme/chart': { bytes: chart, mediaType: 'application/octet-stream' },
    };
    const { pv } = await provider(t, {}, media);
    const html = '<p><img src="cid:logo@acme"> and <img src="cid:chart"></p>';
    const m = message(
      {},
      {
        html,
        inline_images: [
          { cid: 'logo@acme', storage_key: 'tenant/acme/logo' },
          {
            cid: 'chart',
            media_type: 'image/jpeg',
            storage_key: 'tenant/acme/chart',
            filename: 'chart.jpg',
          },
        ],
      },
    );
    await pv.send(m);
    const got = await relay.waitForMessage(forRecipient(m.recipient));
    t.equal(got.html, html, 'the html keeps its cid: references');
    const byCid = Object.fromEntries(got.attachments.map((a) => [a.cid, a]));
    t.same(Object.keys(byCid).sort(), ['chart', 'logo@acme']);
    t.equal(
      byCid['logo@acme']!.contentId,
      '<logo@acme>',
      'Content-ID is the cid in angle brackets',
    );
    t.ok(byCid['logo@acme']!.content.equals(logo), 'the logo arrives byte for byte');
    t.ok(byCid.chart!.content.equals(chart), 'the chart arrives byte for byte');
    t.equal(
      byCid['logo@acme']!.contentType,
      'image/png',
      'without media_type, the stored media type',
    );
    t.equal(byCid.chart!.contentType, 'image/jpeg', "the content's media_type wins");
    t.equal(byCid.chart!.filename, 'chart.jpg');
    t.ok(
      got.attachments.every((a) => a.related && a.contentDisposition === 'inline'),
      'inline parts inside multipart/related',
    );

    const tree = mimeTree(got.raw.toString('latin1'));
    t.equal(tree.type, 'multipart/alternative', 'root: multipart/alternative');
    t.same(
      tree.parts.map((p) => p.type),
      ['text/plain', 'multipart/related'],
      'text first, then the related group',
    );
    const related = tree.parts[1]!;
    t.same(
      related.parts.map((p) => p.type),
      ['text/html', 'image/png', 'image/jpeg'],
      'related: the html, then its images',
    );
    t.match(related.parts[1]!.headers, /Content-ID: <logo@acme>/i);
    t.match(related.parts[2]!.headers, /Content-ID: <chart>/i);
  },
);

t.test(
  'content no retry can fix is refused permanently; a storage outage is transient',
  async (t) => {
    const { pv } = await provider(t);
    const before = relay.received.length;
    t.match(await failure(pv.send(message({}, { body: undefined, html: undefined }))), {
      kind: 'permanent',
      message: 'smtp: email content has neither body nor html',
    });
    t.match(
      await failure(
        pv.send(message({}, { html: undefined, inline_images: [{ cid: 'x', storage_key: 'k' }] })),
      ),
      { kind: 'permanent', message: /inline_images but no html/ },
    );
    t.match(await failure(pv.send(message({}, { inline_images: [{ cid: 'x' }] }))), {
      kind: 'permanent',
      message: /inline_images\[0\] \(cid x\) has no storage_key/,
    });
    t.match(await failure(pv.send(message({ recipient: 'not-an-address' }))), {
      kind: 'permanent',
      message: 'smtp: the recipient "not-an-address" is not an email address',
    });
    t.match(await failure(pv.send(message({ tenantSettings: { from_address: 'acme' } }))), {
      kind: 'permanent',
      message: /From address .* "acme" is not an email address/,
    });
    t.match(await failure(pv.send(message({ channel: 'sms' }))), {
      kind: 'permanent',
      message: /email only/,
    });
    t.match(
      await failure(
        pv.send(message({}, { inline_images: [{ cid: 'logo', storage_key: 'missing/key' }] })),
      ),
      {
        kind: 'transient',
        message:
          /cannot read inline image logo \(storage_key missing\/key\): no media stored under missing\/key/,
      },
    );
    t.equal(relay.received.length, before, 'nothing reached the relay');
  },
);

t.test('caller text cannot add headers', async (t) => {
  const { pv } = await provider(t);
  const m = message(
    { eventType: 'evil\r\nBcc: attacker@evil.example' },
    { subject: 'Hi\r\nBcc: attacker@evil.example' },
  );
  await pv.send(m);
  const got = await relay.waitForMessage(forRecipient(m.recipient));
  t.equal(got.headers.bcc, undefined, 'no Bcc header');
  t.same(got.envelope.rcptTo, [m.recipient], 'no extra recipient');
  t.equal(got.subject, 'Hi Bcc: attacker@evil.example', 'the subject stays one line');
  t.equal(got.headers['x-ens-event-type'], 'evil Bcc: attacker@evil.example');
});

t.test('Message-ID is the same for every attempt of a delivery', async (t) => {
  const { pv } = await provider(t);
  const m = message();
  const a = await pv.send(m);
  const b = await pv.send({ ...m, attempt: 2 });
  t.equal(
    a.providerMessageId,
    b.providerMessageId,
    'a retry carries the Message-ID of the first attempt, so receivers can drop a duplicate',
  );
});

t.test('DKIM: signed with d= and s= when configured, and the signature verifies', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const dkim = {
    domainName: 'ens.example',
    keySelector: 'ens2026',
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
  const { pv } = await provider(
    t,
    { dkim },
    { k: { bytes: randomBytes(500), mediaType: 'image/png' } },
  );
  const m = message(
    {},
    { inline_images: [{ cid: 'logo', storage_key: 'k' }], html: '<img src="cid:logo">' },
  );
  await pv.send(m);
  const got = await relay.waitForMessage(forRecipient(m.recipient));
  t.ok(got.headers['dkim-signature'], 'DKIM-Signature header present');
  const v = verifyDkim(got.raw, publicKey);
  t.equal(v.tags.d, 'ens.example', 'd= is the configured domain');
  t.equal(v.tags.s, 'ens2026', 's= is the configured selector');
  t.match(v.tags.h, /from/i, 'From is signed');
  t.ok(v.ok, `the signature (html + inline image) verifies over the received bytes (${v.reason})`);
  const tampered = Buffer.from(
    got.raw.toString('latin1').replace('Plain text body', 'Plain text bodY'),
    'latin1',
  );
  t.notOk(
    verifyDkim(tampered, publicKey).ok,
    'and fails once the body is changed (the check is real)',
  );

  const plain = message();
  await pv.send(plain);
  const signedToo = await relay.waitForMessage(forRecipient(plain.recipient));
  t.ok(verifyDkim(signedToo.raw, publicKey).ok, 'a text+html message without images verifies too');

  const { pv: noDkim } = await provider(t);
  const m3 = message();
  await noDkim.send(m3);
  const unsigned = await relay.waitForMessage(forRecipient(m3.recipient));
  t.equal(unsigned.headers['dkim-signature'], undefined, 'no DKIM-Signature without dkim config');
});

t.test('the pool reuses one authenticated connection', async (t) => {
  const { pv } = await provider(t, { maxConnections: 1 });
  const before = relay.authAttempts.length;
  const ms = [message(), message(), message()];
  for (const m of ms) await pv.send(m);
  for (const m of ms) await relay.waitForMessage(forRecipient(m.recipient));
  t.equal(relay.authAttempts.length - before, 1, 'three sends, one AUTH');

  // An idle pooled connection runs into timeoutMs and is dropped; the next send opens another.
  const { pv: idle } = await provider(t, { timeoutMs: 300 });
  const first = message();
  await idle.send(first);
  const closedBefore = relay.sessionsClosed;
  await relay.waitUntil(() => relay.sessionsClosed > closedBefore, 3_000);
  const second = message();
  await idle.send(second);
  t.ok(
    await relay.waitForMessage(forRecipient(second.recipient)),
    'a send after the idle connection dropped goes through',
  );

  const { pv: single } = await provider(t, { pool: false });
  const m = message();
  await single.send(m);
  t.ok(await relay.waitForMessage(forRecipient(m.recipient)), 'pool: false sends too');
});

t.test(
  'recipient and message refusals: 5xx permanent with the server text, 4xx transient, ' +
    'throttling rate-limited',
  async (t) => {
    const { pv } = await provider(t);
    const cases: [string, 'permanent' | 'transient' | 'rate_limited', string][] = [
      [
        'reject-550@example.org',
        'permanent',
        'smtp 550 5.1.1 <reject-550@example.org>: Recipient address rejected: User unknown in ' +
          'local recipient table',
      ],
      [
        'relay-554@example.org',
        'permanent',
        'smtp 554 5.7.1 <relay-554@example.org>: Relay access denied',
      ],
      [
        'defer-451@example.org',
        'transient',
        'smtp 451 4.3.0 <defer-451@example.org>: Recipient address rejected: Temporary lookup ' +
          'failure',
      ],
      [
        'grey-450@example.org',
        'transient',
        'smtp 450 4.2.0 <grey-450@example.org>: Recipient address rejected: Greylisted, see ' +
          'https://postgrey.schweikert.ch/help/',
      ],
      [
        'full-452@example.org',
        'transient',
        'smtp 452 4.3.1 <full-452@example.org>: Recipient address rejected: Insufficient ' +
          'system storage',
      ],
      // RFC 5321 4.5.3.1.10: a 552 to RCPT TO is the old "too many recipients" code, treated as
      // 452.
      ['limit-552@example.org', 'transient', 'smtp 552 5.5.3 Error: too many recipients'],
      [
        'throttle-454@example.org',
        'rate_limited',
        'smtp 454 4.7.0 Throttling failure: Maximum sending rate exceeded.',
      ],
      [
        'data-554@example.org',
        'permanent',
        'smtp 554 5.7.1 Message rejected: content looks like spam',
      ],
      [
        'data-552@example.org',
        'permanent',
        'smtp 552 5.3.4 Message size exceeds fixed maximum message size',
      ],
      ['data-451@example.org', 'transient', 'smtp 451 4.3.0 Error: queue file write error'],
    ];
    for (const [recipient, kind, text] of cases) {
      t.same(
        await failure(pv.send(message({ recipient }))),
        { kind, message: text },
        `${recipient} → ${kind}`,
      );
    }
    const ours = () => relay.rejections.filter((r) => cases.some(([c]) => c === r.address));
    await relay.waitUntil(() => ours().length === cases.length);
    t.same(
      ours().map((r) => `${r.stage}:${r.code}`),
      [
        'rcpt:550',
        'rcpt:554',
        'rcpt:451',
        'rcpt:450',
        'rcpt:452',
        'rcpt:552',
        'rcpt:454',
        'data:554',
        'data:552',
        'data:451',
      ],
      'the relay refused each at the stage it was set to',
    );
    t.notOk(
      relay.received.some((m) => m.envelope.rcptTo.some((r) => cases.some(([c]) => c === r))),
      'none of them was taken',
    );
    const after = message();
    await pv.send(after);
    t.ok(
      await relay.waitForMessage(forRecipient(after.recipient)),
      'the pooled connection still sends after the refusals',
    );
  },
);

t.test('authentication failures are transient (a configuration fault)', async (t) => {
  const { pv } = await provider(t, { auth: { user: USER, pass: 'wrong-password' } });
  const before = relay.authAttempts.length;
  const f = await failure(pv.send(message()));
  t.equal(f.kind, 'transient');
  t.match(
    f.message,
    /^smtp 535 5\.7\.8 Error: authentication failed: authentication failure \(.*auth\.user and auth\.pass\)$/,
  );
  t.notMatch(f.message, 'wrong-password', 'the password is not in the error');
  await relay.waitUntil(() => relay.authAttempts.length > before);
  t.same(
    relay.authAttempts.slice(before),
    [{ method: 'PLAIN', user: USER, ok: false }],
    'the relay saw one failed AUTH PLAIN as the configured user',
  );

  const { pv: anonymous } = await provider(t, { auth: undefined });
  const g = await failure(anonymous.send(message()));
  t.equal(g.kind, 'transient', 'no credentials where the relay requires them (530) is transient');
  t.match(g.message, /^smtp 530 .*authentication/i);
});

t.test('checkCredentials connects, upgrades and authenticates', async (t) => {
  const { pv } = await provider(t);
  await t.resolves(pv.checkCredentials!(), 'good credentials');
  const { pv: bad } = await provider(t, { auth: { user: USER, pass: 'nope' } });
  const f = await failure(bad.checkCredentials!());
  t.match(
    f,
    { kind: 'transient', message: /^smtp 535 5\.7\.8/ },
    'wrong credentials reject with the relay reply',
  );
  const { pv: noCa } = await provider(t, { tls: undefined });
  t.match(
    await failure(noCa.checkCredentials!()),
    { kind: 'transient', message: /certificate/ },
    'an untrusted certificate rejects',
  );
});

t.test('connection-level failures are transient', async (t) => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const freePort = (closed.address() as { port: number }).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const { pv: refused } = await provider(t, { port: freePort });
  t.match(
    await failure(refused.send(message())),
    { kind: 'transient', message: /ECONNREFUSED/ },
    'connection refused',
  );

  const { pv: untrusted } = await provider(t, { tls: undefined });
  t.match(
    await failure(untrusted.send(message())),
    { kind: 'transient', message: /UNABLE_TO_VERIFY_LEAF_SIGNATURE.*tls\.ca/ },
    'a certificate that does not verify',
  );

  const { pv: wrongName } = await provider(t, {
    tls: { ca: TEST_CA_PEM, servername: 'smtp.elsewhere.example' },
  });
  t.match(
    await failure(wrongName.send(message())),
    { kind: 'transient', message: /ERR_TLS_CERT_ALTNAME_INVALID/ },
    'a certificate for another name',
  );

  const knob = new SmtpTestServer({ users: { [USER]: PASS } });
  const k = await knob.start();
  t.teardown(() => knob.stop());

  await knob.set({ greeting: '421' });
  const { pv: busy } = await provider(t, { ...k });
  t.match(
    await failure(busy.send(message())),
    {
      kind: 'transient',
      message:
        'smtp 421 4.3.2 mx.ens-test.invalid Service currently unavailable (during the greeting)',
    },
    '421 instead of the greeting',
  );

  await knob.set({ greeting: 'silent' });
  const { pv: mute } = await provider(t, { ...k, timeoutMs: 400 });
  const started = Date.now();
  const f = await failure(mute.send(message()));
  const took = Date.now() - started;
  t.match(
    f,
    {
      kind: 'transient',
      message: /^smtp: ETIMEDOUT: .*no answer from the relay within timeoutMs\)$/,
    },
    'a server that never greets',
  );
  t.ok(took >= 350 && took < 2_000, `gave up after timeoutMs (${took} ms)`);

  const { pv: slow } = await provider(t, { ...k, timeoutMs: 10_000, sendTimeoutMs: 300 });
  const started2 = Date.now();
  const g = await failure(slow.send(message()));
  t.match(
    g,
    {
      kind: 'transient',
      message: 'smtp: the relay did not finish the send within sendTimeoutMs (300 ms)',
    },
    'sendTimeoutMs bounds the whole send',
  );
  t.ok(Date.now() - started2 < 2_000, 'well before timeoutMs');
  await knob.set({ greeting: 'ok' });
});

t.test('requireTLS: refuses a relay without STARTTLS unless turned off', async (t) => {
  const plain = new SmtpTestServer({ users: { [USER]: PASS }, starttls: false });
  const p = await plain.start();
  t.teardown(() => plain.stop());
  const { pv } = await provider(t, { ...p });
  const f = await failure(pv.send(message()));
  t.match(
    f,
    { kind: 'transient', message: /during STARTTLS.*requireTLS/ },
    'no STARTTLS: the send fails before AUTH',
  );
  t.same(plain.authAttempts, [], 'and the credentials were never sent in clear');
  const { pv: lax } = await provider(t, { ...p, requireTLS: false });
  const m = message();
  await lax.send(m);
  const got = await plain.waitForMessage(forRecipient(m.recipient));
  t.equal(got.secure, false, 'requireTLS false: sent in clear to a relay without TLS');
});

t.test("a message over the relay's SIZE limit is permanent", async (t) => {
  const small = new SmtpTestServer({ users: { [USER]: PASS }, size: 4_096 });
  const p = await small.start();
  t.teardown(() => small.stop());
  const { pv } = await provider(
    t,
    { ...p },
    { big: { bytes: randomBytes(20_000), mediaType: 'image/png' } },
  );
  const f = await failure(
    pv.send(
      message(
        {},
        { html: '<img src="cid:big">', inline_images: [{ cid: 'big', storage_key: 'big' }] },
      ),
    ),
  );
  t.match(f, { kind: 'permanent', message: /^smtp 552 .*size/i }, `refused: ${f.message}`);
  t.equal(small.received.length, 0);
});

t.test('classification of replies the test relay does not produce', async (t) => {
  const cls = (err: object) => {
    const c = classifyError(classifySmtpError(Object.assign(new Error('x'), err)));
    return { kind: c.kind, message: c.message };
  };
  t.same(
    cls({
      code: 'EENVELOPE',
      response: '553 5.7.1 <a@b.example>: Sender address rejected: not owned by user relay-user',
      responseCode: 553,
      command: 'MAIL FROM',
    }),
    {
      kind: 'permanent',
      message:
        'smtp 553 5.7.1 <a@b.example>: Sender address rejected: not owned by user relay-user',
    },
    'a refused sender is permanent for that message',
  );
  t.match(
    cls({
      code: 'EENVELOPE',
      response: '503 5.5.1 Error: need RCPT command',
      responseCode: 503,
      command: 'DATA',
    }),
    { kind: 'transient' },
    '503 bad sequence is a session fault',
  );
  t.match(
    cls({
      code: 'EPROTOCOL',
      response: '554 5.7.1 Service unavailable; client host [192.0.2.1] blocked',
      responseCode: 554,
      command: 'CONN',
    }),
    { kind: 'transient', message: /^smtp 554 .*blocked \(during the greeting\)$/ },
    'a 5xx greeting refuses the session, not the message',
  );
  t.match(
    cls({
      code: 'EPROTOCOL',
      response: '550 5.7.1 EHLO name refused',
      responseCode: 550,
      command: 'EHLO',
    }),
    { kind: 'transient', message: /during EHLO/ },
  );
  t.match(
    cls({
      code: 'EMESSAGE',
      response: '421 4.7.0 Too many connections from your IP',
      responseCode: 421,
      command: 'DATA',
    }),
    { kind: 'rate_limited' },
  );
  t.match(
    cls({
      code: 'EMESSAGE',
      response: '421 4.4.2 Connection dropped',
      responseCode: 421,
      command: 'DATA',
    }),
    { kind: 'transient' },
  );
  t.match(
    cls({
      code: 'EAUTH',
      response: '534 5.7.9 Application-specific password required',
      responseCode: 534,
      command: 'AUTH PLAIN',
    }),
    { kind: 'transient', message: /auth\.user and auth\.pass/ },
  );
  t.match(
    cls({
      code: 'EMESSAGE',
      command: 'MAIL FROM',
      message: 'Message size larger than allowed 1000',
    }),
    { kind: 'permanent', message: /size larger than allowed/ },
  );
  t.match(cls({ code: 'ECONNECTION', message: 'Connection closed unexpectedly' }), {
    kind: 'transient',
    message: 'smtp: ECONNECTION: Connection closed unexpectedly',
  });
  t.match(cls({ code: 'EABORT', name: 'AbortError' }), {
    kind: 'transient',
    message: /sendTimeoutMs/,
  });
  t.match(
    classifyError(classifySmtpError('a string')),
    { kind: 'transient' },
    'anything unexpected is transient',
  );
});

t.test('replyText joins multi-line replies', async (t) => {
  t.equal(
    replyText(
      '550-5.7.1 [192.0.2.1] The IP you are using was blocked\n550-5.7.1 see ' +
        'https://support.example/blocked\n550 5.7.1 for details',
    ),
    '550 5.7.1 [192.0.2.1] The IP you are using was blocked see ' +
      'https://support.example/blocked for details',
  );
});

t.test('conformance', async (t) =>
  conformanceTest(t, '@ens/plugin-smtp', await import('../src/index.ts'), fixture),
);
