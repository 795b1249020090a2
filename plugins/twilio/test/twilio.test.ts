import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import {
  checkConfig,
  classifyError,
  type OutboundMessage,
  type PluginContext,
  type Provider,
  type TenantSettings,
} from '@ens/plugin-sdk';
import {
  conformanceTest,
  recordingContext,
  type RecordingContext,
  type TapLike,
} from '@ens/plugin-sdk/conformance';
import plugin from '../src/index.ts';
import fixture from '../src/conformance.ts';
import type { TwilioConfig } from '../src/config.ts';
import { retryAfterMs } from '@ens/plugin-sdk';
import { classifyResponse } from '../src/error-classes.ts';
import { formParams, twilioSignature, verifyTwilioSignature } from '../src/signature.ts';
import { FakeTwilio } from '../src/testing/fake-twilio.ts';

const PKG = '@ens/plugin-twilio';
const PUBLIC_STATUS_URL = 'https://ens.example.com/webhooks/twilio/status';
const SERVICE_SID = `MG${'a1'.repeat(16)}`;

const sms = (
  recipient: string,
  tenantSettings: TenantSettings = {},
  body = 'Your code is 123456',
): OutboundMessage => ({
  deliveryId: '0190a0b0-0000-7000-8000-000000000042',
  attempt: 1,
  channel: 'sms',
  recipient,
  tenant: 'acme',
  tenantSettings,
  eventType: 'otp.requested',
  reference: null,
  content: { kind: 'rendered', body },
});

/** The config as ENS's loader would hand it over: validated, defaults filled in. */
const load = (raw: unknown) => checkConfig(PKG, plugin as never, raw) as TwilioConfig;

async function make(
  raw: Partial<TwilioConfig> & Pick<TwilioConfig, 'accountSid' | 'authToken'>,
  ctx: PluginContext = recordingContext(),
): Promise<Provider> {
  return plugin.create(load(raw), ctx);
}

async function failure(p: Promise<unknown>) {
  try {
    await p;
  } catch (e) {
    return classifyError(e);
  }
  throw new Error('expected the promise to reject');
}

function baseConfig(fake: FakeTwilio, extra: Partial<TwilioConfig> = {}): TwilioConfig {
  return {
    accountSid: fake.accountSid,
    authToken: fake.authToken,
    from: '+15005550006',
    baseUrl: fake.baseUrl,
    statusCallbackUrl: PUBLIC_STATUS_URL,
    ...extra,
  };
}

t.test("X-Twilio-Signature matches Twilio's published example and its URL rules", async (t) => {
  // From Twilio's signature-validation samples (twilio.com/docs/usage/webhooks/webhooks-security).
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  const params = new Map(
    Object.entries({
      CallSid: 'CA1234567890ABCDE',
      Caller: '+14158675310',
      Digits: '1234',
      From: '+14158675310',
      To: '+18005551212',
    }).map(([k, v]) => [k, [v]]),
  );
  t.equal(twilioSignature('12345', url, params), 'GvWf1cFY/Q7PnoempGyD5oXAezc=');
  t.ok(verifyTwilioSignature('12345', 'GvWf1cFY/Q7PnoempGyD5oXAezc=', url, params));
  t.ok(
    verifyTwilioSignature(
      '12345',
      'GvWf1cFY/Q7PnoempGyD5oXAezc=',
      'https://mycompany.com:443/myapp.php?foo=1&bar=2',
      params,
    ),
    'signed without the port, configured with :443',
  );
  const withPort = twilioSignature(
    '12345',
    'https://mycompany.com:443/myapp.php?foo=1&bar=2',
    params,
  );
  t.ok(
    verifyTwilioSignature('12345', withPort, url, params),
    'signed with :443, configured without',
  );
  t.notOk(
    verifyTwilioSignature(
      '12345',
      'GvWf1cFY/Q7PnoempGyD5oXAezc=',
      'https://mycompany.com/myapp.php?foo=1&bar=3',
      params,
    ),
    'another query string',
  );
  t.notOk(
    verifyTwilioSignature('54321', 'GvWf1cFY/Q7PnoempGyD5oXAezc=', url, params),
    'another auth token',
  );
  t.notOk(verifyTwilioSignature('12345', undefined, url, params), 'no header');
  t.notOk(verifyTwilioSignature('12345', 'short', url, params), 'a header of another length');
  t.same(
    [...formParams(Buffer.from('B=2&A=x+y&A=%2B1')).entries()],
    [
      ['B', ['2']],
      ['A', ['x y', '+1']],
    ],
    'form decoding keeps repeated names and decodes + and %XX',
  );
});

t.test('config schema', async (t) => {
  const fake = new FakeTwilio();
  const ok = load({ accountSid: fake.accountSid, authToken: fake.authToken, from: '+15005550006' });
  t.equal(ok.baseUrl, 'https://api.twilio.com', 'baseUrl defaults to the real API');
  t.equal(ok.timeoutMs, 10_000, 'timeoutMs defaults to 10 s');
  t.throws(
    () => load({ accountSid: fake.accountSid, authToken: fake.authToken }),
    /config \//,
    'a sender (from or messagingServiceSid) is required',
  );
  t.ok(
    load({
      accountSid: fake.accountSid,
      authToken: fake.authToken,
      messagingServiceSid: SERVICE_SID,
    }),
    'a Messaging Service is a sender',
  );
  t.throws(
    () => load({ accountSid: fake.accountSid, from: '+15005550006' }),
    /config \//,
    'authToken is required',
  );
  t.throws(
    () => load({ accountSid: 'SK0123', authToken: 'x', from: '+15005550006' }),
    /config \/accountSid/,
    'accountSid must be an AC… SID',
  );
  t.throws(
    () =>
      load({ accountSid: fake.accountSid, authToken: 'x', from: '+1', apiKeySid: fake.apiKeySid }),
    /config \/.*apiKeySecret/,
    'apiKeySid without apiKeySecret',
  );
  t.throws(
    () =>
      load({
        accountSid: fake.accountSid,
        authToken: 'x',
        from: '+1',
        statusCallbackUrl: 'not a url',
      }),
    /config \/statusCallbackUrl/,
  );
  t.throws(
    () => load({ accountSid: fake.accountSid, authToken: 'x', from: '+1', sender: '+1' }),
    /sender.*is not a setting/,
  );
});

t.test('send', async (t) => {
  const fake = new FakeTwilio();
  await fake.start();
  t.teardown(() => fake.stop());
  t.beforeEach(() => fake.reset());

  t.test('creates a Message with Basic auth and the form fields Twilio documents', async (t) => {
    const provider = await make(baseConfig(fake));
    const { providerMessageId } = await provider.send(sms('+15557654321'));
    t.match(providerMessageId, /^SM[0-9a-f]{32}$/);
    t.equal(fake.received.length, 1);
    const r = fake.received[0]!;
    t.equal(r.method, 'POST');
    t.equal(r.path, `/2010-04-01/Accounts/${fake.accountSid}/Messages.json`);
    t.same(r.auth, { username: fake.accountSid, password: fake.authToken });
    t.match(r.headers['content-type'], /^application\/x-www-form-urlencoded/);
    t.strictSame(r.form, {
      To: '+15557654321',
      From: '+15005550006',
      Body: 'Your code is 123456',
      StatusCallback: PUBLIC_STATUS_URL,
    });
    const stored = fake.messages.get(providerMessageId);
    t.equal(stored?.status, 'queued', 'the id returned is the one Twilio created');
  });

  t.test("the tenant's sender_id overrides the configured From", async (t) => {
    const provider = await make(baseConfig(fake));
    await provider.send(sms('+15557654321', { sender_id: 'ACME' }));
    t.equal(fake.received[0]!.form.From, 'ACME');
  });

  t.test('a Messaging Service picks the sender unless the tenant names one', async (t) => {
    const provider = await make({
      ...baseConfig(fake),
      from: undefined,
      messagingServiceSid: SERVICE_SID,
    });
    const { providerMessageId } = await provider.send(sms('+15557654321'));
    t.strictSame(fake.received[0]!.form, {
      To: '+15557654321',
      MessagingServiceSid: SERVICE_SID,
      Body: 'Your code is 123456',
      StatusCallback: PUBLIC_STATUS_URL,
    });
    t.equal(fake.messages.get(providerMessageId)?.status, 'accepted');
    await provider.send(sms('+15557654321', { sender_id: '+15005550001' }));
    t.equal(fake.received[1]!.form.From, '+15005550001');
    t.equal(fake.received[1]!.form.MessagingServiceSid, SERVICE_SID);
  });

  t.test('without statusCallbackUrl no StatusCallback is sent', async (t) => {
    const provider = await make({ ...baseConfig(fake), statusCallbackUrl: undefined });
    await provider.send(sms('+15557654321'));
    t.notOk('StatusCallback' in fake.received[0]!.form);
  });

  t.test('an API key authenticates with the account SID still in the path', async (t) => {
    const provider = await make(
      baseConfig(fake, { apiKeySid: fake.apiKeySid, apiKeySecret: fake.apiKeySecret }),
    );
    await provider.send(sms('+15557654321'));
    t.same(fake.received[0]!.auth, { username: fake.apiKeySid, password: fake.apiKeySecret });
    t.equal(fake.received[0]!.path, `/2010-04-01/Accounts/${fake.accountSid}/Messages.json`);
  });

  t.test("Twilio's refusals are permanent with Twilio's code and words", async (t) => {
    const provider = await make(baseConfig(fake));
    const cases: [string, string][] = [
      ['+15550000000', "twilio 21211: The 'To' number +15550000000 is not a valid phone number."],
      ['+15550000001', 'twilio 21610: Attempt to send to unsubscribed recipient'],
      [
        '+15550000002',
        'twilio 21408: Permission to send an SMS has not been enabled for the region indicated ' +
          "by the 'To' number: +15550000002.",
      ],
      ['+15550000003', "twilio 21614: 'To' number is not a valid mobile number"],
      [
        '+15550000004',
        "twilio 21612: The 'To' phone number: +15550000004, is not currently reachable using " +
          "the 'From' phone number: +15005550006 via SMS.",
      ],
    ];
    for (const [to, message] of cases) {
      const c = await failure(provider.send(sms(to)));
      t.equal(c.kind, 'permanent', to);
      t.equal(c.message, message, to);
    }
    t.equal(fake.received.length, cases.length, "each refusal was Twilio's answer to a request");
    fake.setOutcome('+15557654321', {
      status: 400,
      code: 21606,
      message:
        "The 'From' phone number provided is not a valid message-capable Twilio phone number " +
        'for this destination/account',
    });
    const other = await failure(provider.send(sms('+15557654321')));
    t.equal(other.kind, 'permanent', 'any other 4xx is permanent');
    t.match(other.message, /^twilio 21606: The 'From' phone number/);
    const long = await failure(provider.send(sms('+15557654322', {}, 'x'.repeat(1601))));
    t.equal(long.kind, 'permanent');
    t.equal(
      long.message,
      'twilio 21617: The concatenated message body exceeds the 1600 character limit.',
    );
  });

  t.test(
    'refusals about the recipient carry their RecipientRefusal, so ENS suppresses the number',
    async (t) => {
      const provider = await make(baseConfig(fake));
      const cases: [string, number, 'invalid_recipient' | 'opt_out' | undefined][] = [
        ['+15550000000', 21211, 'invalid_recipient'],
        ['+15550000003', 21614, 'invalid_recipient'],
        ['+15550000001', 21610, 'opt_out'],
        // About the sender or the account: another sender or a setting fixes them, so no
        // suppression.
        ['+15550000002', 21408, undefined],
        ['+15550000004', 21612, undefined],
      ];
      for (const [to, code, refusal] of cases) {
        const c = await failure(provider.send(sms(to)));
        t.equal(c.kind, 'permanent', `${code} is permanent`);
        t.match(c.message, new RegExp(`^twilio ${code}: `), `${code}: Twilio's code and words`);
        t.equal(c.recipientRefusal, refusal, `${code} → ${refusal ?? 'no recipient refusal'}`);
      }
      const long = await failure(provider.send(sms('+15557654322', {}, 'x'.repeat(1601))));
      t.equal(long.recipientRefusal, undefined, '21617 (body too long) is about the message');
      fake.setOutcome('+15557654323', { status: 500, code: 21211, message: 'odd' });
      t.equal(
        (await failure(provider.send(sms('+15557654323')))).recipientRefusal,
        undefined,
        'a 5xx is transient whatever its code',
      );
    },
  );

  t.test('429 is rate-limited with the Retry-After hint', async (t) => {
    const provider = await make(baseConfig(fake));
    const byNumber = await failure(provider.send(sms('+15550000429')));
    t.equal(byNumber.kind, 'rate_limited');
    t.equal(byNumber.retryAfterMs, 7_000);
    t.equal(byNumber.message, 'twilio 20429: Too Many Requests');
    fake.knobs.rateLimit = { retryAfter: '3' };
    t.equal((await failure(provider.send(sms('+15557654321')))).retryAfterMs, 3_000);
    fake.knobs.rateLimit = {};
    const noHint = await failure(provider.send(sms('+15557654321')));
    t.equal(noHint.kind, 'rate_limited');
    t.equal(
      noHint.retryAfterMs,
      undefined,
      'no Retry-After, no hint: the worker backs off on its own',
    );
    const at = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
    t.equal(
      retryAfterMs('Wed, 21 Oct 2015 07:28:00 GMT', at - 4_000),
      4_000,
      'an HTTP-date Retry-After',
    );
    t.equal(retryAfterMs('soon'), undefined);
  });

  t.test('5xx is transient', async (t) => {
    const provider = await make(baseConfig(fake));
    fake.knobs.serverError = 500;
    const c500 = await failure(provider.send(sms('+15557654321')));
    t.equal(c500.kind, 'transient');
    t.equal(c500.message, 'twilio 20500: Internal Server Error (HTTP 500)');
    fake.knobs.serverError = null;
    const c503 = await failure(provider.send(sms('+15550000503')));
    t.equal(c503.kind, 'transient');
    t.match(c503.message, /^twilio 20503: Service Unavailable/);
    // A load balancer in front of Twilio answers without Twilio's JSON.
    const proxy = classifyResponse(502, '<html><body>Bad Gateway</body></html>', null);
    t.equal(proxy.ensErrorKind, 'transient');
    t.equal(proxy.message, 'twilio: HTTP 502: <html><body>Bad Gateway</body></html>');
  });

  t.test('wrong credentials are transient (a configuration fault)', async (t) => {
    const provider = await make(baseConfig(fake, { authToken: 'f'.repeat(32) }));
    const c = await failure(provider.send(sms('+15557654321')));
    t.equal(c.kind, 'transient');
    t.match(c.message, /^twilio 20003: Authenticate \(HTTP 401/);
    t.notMatch(c.message, 'f'.repeat(32), 'the secret stays out of the error');
    const wrongKey = await make(
      baseConfig(fake, { apiKeySid: fake.apiKeySid, apiKeySecret: 'nope' }),
    );
    t.equal((await failure(wrongKey.send(sms('+15557654321')))).kind, 'transient');
  });

  t.test("a 404 (wrong baseUrl) is transient, not the message's fault", async (t) => {
    const provider = await make(baseConfig(fake, { baseUrl: `${fake.baseUrl}/v1` }));
    const c = await failure(provider.send(sms('+15557654321')));
    t.equal(c.kind, 'transient');
    t.match(
      c.message,
      /^twilio 20404: The requested resource \/v1\/2010-04-01\/Accounts\/.* was not found \(HTTP 404/,
    );
  });

  t.test('a Twilio that never answers is a transient timeout', async (t) => {
    const provider = await make(baseConfig(fake, { timeoutMs: 200 }));
    fake.knobs.hang = true;
    const started = Date.now();
    const c = await failure(provider.send(sms('+15557654321')));
    t.equal(c.kind, 'transient');
    t.equal(c.message, 'twilio: no answer within 200 ms');
    t.ok(Date.now() - started < 5_000, 'gave up on time');
    t.equal(fake.received.length, 1, 'the request reached Twilio');
  });

  t.test('a refused connection is transient', async (t) => {
    const gone = new FakeTwilio();
    const url = await gone.start();
    await gone.stop();
    const provider = await make({ ...baseConfig(fake), baseUrl: url });
    const c = await failure(provider.send(sms('+15557654321')));
    t.equal(c.kind, 'transient');
    t.match(c.message, /^twilio: request failed: ECONNREFUSED/);
  });

  t.test('content ENS cannot send is refused before Twilio is asked', async (t) => {
    const provider = await make(baseConfig(fake));
    t.equal((await failure(provider.send(sms('+15557654321', {}, '')))).kind, 'permanent');
    t.equal(
      (await failure(provider.send({ ...sms('+15557654321'), channel: 'whatsapp' }))).kind,
      'permanent',
    );
    t.equal(fake.received.length, 0);
  });
});

t.test('checkCredentials fetches the Account', async (t) => {
  const fake = new FakeTwilio();
  await fake.start();
  t.teardown(() => fake.stop());
  await (await make(baseConfig(fake))).checkCredentials!();
  t.equal(fake.received[0]!.method, 'GET');
  t.equal(fake.received[0]!.path, `/2010-04-01/Accounts/${fake.accountSid}.json`);
  t.same(fake.received[0]!.auth, { username: fake.accountSid, password: fake.authToken });
  await (
    await make(baseConfig(fake, { apiKeySid: fake.apiKeySid, apiKeySecret: fake.apiKeySecret }))
  ).checkCredentials!();
  t.same(fake.received[1]!.auth, { username: fake.apiKeySid, password: fake.apiKeySecret });
  const wrong = await failure(
    (await make(baseConfig(fake, { authToken: '0'.repeat(32) }))).checkCredentials!(),
  );
  t.equal(wrong.kind, 'transient');
  t.match(wrong.message, /twilio 20003: Authenticate/);
  fake.accountStatus = 'suspended';
  const suspended = await failure((await make(baseConfig(fake))).checkCredentials!());
  t.equal(suspended.message, `twilio: account ${fake.accountSid} is suspended`);
});

t.test('the fake answers as Twilio does to malformed creates', async (t) => {
  const fake = new FakeTwilio();
  await fake.start();
  t.teardown(() => fake.stop());
  const post = async (form: Record<string, string>) => {
    const res = await fetch(
      `${fake.baseUrl}/2010-04-01/Accounts/${fake.accountSid}/Messages.json`,
      {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${fake.accountSid}:${fake.authToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams(form).toString(),
      },
    );
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  t.same(await post({ From: '+15005550006', Body: 'x' }), {
    status: 400,
    body: {
      code: 21604,
      message: "A 'To' phone number is required.",
      more_info: 'https://www.twilio.com/docs/errors/21604',
      status: 400,
    },
  });
  t.match(await post({ To: '+15557654321', Body: 'x' }), { status: 400, body: { code: 21603 } });
  t.match(await post({ To: '+15557654321', From: '+15005550006' }), {
    status: 400,
    body: { code: 21602, message: 'Message body is required.' },
  });
  const created = await post({ To: '+15557654321', From: '+15005550006', Body: 'hello' });
  t.equal(created.status, 201);
  t.match(created.body, {
    sid: /^SM[0-9a-f]{32}$/,
    account_sid: fake.accountSid,
    status: 'queued',
    to: '+15557654321',
    from: '+15005550006',
    body: 'hello',
    direction: 'outbound-api',
    api_version: '2010-04-01',
    num_segments: '1',
    error_code: null,
    date_created: /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} \+0000$/,
    uri: new RegExp(`^/2010-04-01/Accounts/${fake.accountSid}/Messages/SM[0-9a-f]{32}\\.json$`),
  });
  const unauth = await fetch(
    `${fake.baseUrl}/2010-04-01/Accounts/${fake.accountSid}/Messages.json`,
    { method: 'POST' },
  );
  t.equal(unauth.status, 401);
  t.same(await unauth.json(), {
    code: 20003,
    message: 'Authenticate',
    more_info: 'https://www.twilio.com/docs/errors/20003',
    status: 401,
  });
});

/** A stand-in for ENS's API role: mounts the plugin's routes at /webhooks/twilio<path>. */
async function ensWebhookServer(t: { teardown(fn: () => unknown): void }) {
  let routes: Provider['routes'] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const u = new URL(req.url ?? '/', `http://${req.headers.host}`);
    const route = routes?.find(
      (r) => r.method === req.method && `/webhooks/twilio${r.path}` === u.pathname,
    );
    if (!route) return void res.writeHead(404).end();
    try {
      const out = await route.handler({
        headers: req.headers,
        query: Object.fromEntries(u.searchParams),
        rawBody: Buffer.concat(chunks),
        url: u.toString(),
      });
      res
        .writeHead(out.status, out.headers)
        .end(
          typeof out.body === 'string' || Buffer.isBuffer(out.body)
            ? out.body
            : JSON.stringify(out.body ?? ''),
        );
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const { port } = server.address() as AddressInfo;
  return {
    statusUrl: `http://127.0.0.1:${port}/webhooks/twilio/status`,
    inboundUrl: `http://127.0.0.1:${port}/webhooks/twilio/inbound`,
    mount: (p: Provider) => {
      routes = p.routes;
    },
  };
}

t.test('status callbacks, end to end through HTTP', async (t) => {
  const fake = new FakeTwilio();
  await fake.start();
  t.teardown(() => fake.stop());
  const ens = await ensWebhookServer(t);
  const ctx: RecordingContext = recordingContext();
  const provider = await make(baseConfig(fake, { statusCallbackUrl: ens.statusUrl }), ctx);
  ens.mount(provider);

  const { providerMessageId: sid } = await provider.send(sms('+15557654321'));
  t.equal(fake.received[0]!.form.StatusCallback, ens.statusUrl);

  t.equal((await fake.sendStatus(sid, 'sent')).status, 200, 'sent is acknowledged');
  t.equal(ctx.reports.length, 0, 'sent is a step on the way, not reported');

  const before = Date.now();
  const delivered = await fake.sendStatus(sid, 'delivered');
  t.equal(delivered.status, 200);
  t.equal(delivered.body, '<Response/>');
  t.match(delivered.headers.get('content-type'), /^text\/xml/);
  t.equal(ctx.reports.length, 1);
  t.equal(ctx.reports[0]!.providerMessageId, sid);
  t.equal(ctx.reports[0]!.status, 'delivered');
  t.ok(
    ctx.reports[0]!.at.getTime() >= before - 1 && ctx.reports[0]!.at.getTime() <= Date.now() + 1,
    'at is when Twilio told us',
  );

  await fake.sendStatus(sid, 'read');
  t.equal(ctx.reports[1]!.status, 'read');

  const { providerMessageId: sid2 } = await provider.send(sms('+15557654322'));
  await fake.sendStatus(sid2, 'undelivered', { errorCode: 30003 });
  t.same(ctx.reports[2], {
    providerMessageId: sid2,
    status: 'failed',
    at: ctx.reports[2]!.at,
    error: 'twilio: undelivered (error 30003)',
  });
  await fake.sendStatus(sid2, 'failed', { errorCode: 30007 });
  t.equal(ctx.reports[3]!.error, 'twilio: failed (error 30007)');

  const forged = await fake.sendStatusCallback(
    ens.statusUrl,
    fake.statusParams(sid2, 'delivered'),
    { signWith: 'not-the-token' },
  );
  t.equal(forged.status, 403, 'a forgery is refused');
  t.equal(ctx.reports.length, 4, 'the forgery reported nothing');
  t.ok(
    ctx.logs.some((l) => l.level === 'warn' && /X-Twilio-Signature/.test(l.msg ?? '')),
    'the refusal is logged',
  );
  t.notOk(JSON.stringify(ctx.logs).includes(fake.authToken), 'the auth token is never logged');
});

t.test('status route details', async (t) => {
  const fake = new FakeTwilio();
  const ctx = recordingContext();
  const provider = await make(
    {
      accountSid: fake.accountSid,
      authToken: fake.authToken,
      from: '+15005550006',
      statusCallbackUrl: PUBLIC_STATUS_URL,
    },
    ctx,
  );
  const route = provider.routes!.find((r) => r.path === '/status' && r.method === 'POST')!;
  const params = {
    MessageSid: `SM${'b'.repeat(32)}`,
    MessageStatus: 'delivered',
    AccountSid: fake.accountSid,
    ApiVersion: '2010-04-01',
  };
  const request = (signedFor: string, arrivedAt: string, p: Record<string, string> = params) => ({
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': fake.sign(signedFor, p),
    },
    query: {},
    rawBody: Buffer.from(new URLSearchParams(p).toString()),
    url: arrivedAt,
  });

  const proxied = await route.handler(
    request(PUBLIC_STATUS_URL, 'http://10.0.0.7:8080/webhooks/twilio/status'),
  );
  t.equal(proxied.status, 200, 'behind a proxy, the configured public URL is the one verified');
  t.equal(ctx.reports.length, 1);
  const internal = await route.handler(
    request(
      'http://10.0.0.7:8080/webhooks/twilio/status',
      'http://10.0.0.7:8080/webhooks/twilio/status',
    ),
  );
  t.equal(internal.status, 403, 'a signature over another URL than the configured one is refused');

  const noSid = { MessageStatus: 'delivered', AccountSid: fake.accountSid };
  const missing = await route.handler(request(PUBLIC_STATUS_URL, PUBLIC_STATUS_URL, noSid));
  t.equal(missing.status, 200, 'genuine but without MessageSid: acknowledged, nothing to report');
  t.equal(ctx.reports.length, 1);

  const legacy = { SmsSid: `SM${'c'.repeat(32)}`, SmsStatus: 'delivered' };
  await route.handler(request(PUBLIC_STATUS_URL, PUBLIC_STATUS_URL, legacy));
  t.equal(
    ctx.reports[1]!.providerMessageId,
    legacy.SmsSid,
    'the legacy SmsSid/SmsStatus names are understood',
  );

  for (const status of ['queued', 'sending', 'sent', 'accepted']) {
    const r = await route.handler(
      request(PUBLIC_STATUS_URL, PUBLIC_STATUS_URL, { ...params, MessageStatus: status }),
    );
    t.equal(r.status, 200, `${status} acknowledged`);
  }
  t.equal(ctx.reports.length, 2, 'intermediate statuses report nothing');

  const fallback = await make(
    { accountSid: fake.accountSid, authToken: fake.authToken, from: '+15005550006' },
    ctx,
  );
  const fr = fallback.routes![0]!;
  const seen = 'https://ens.internal.test/webhooks/twilio/status';
  t.equal(
    (await fr.handler(request(seen, seen))).status,
    200,
    'without statusCallbackUrl, the URL as ENS saw it is verified',
  );
  t.equal((await fr.handler(request(PUBLIC_STATUS_URL, seen))).status, 403);

  const broken = await make(
    {
      accountSid: fake.accountSid,
      authToken: fake.authToken,
      from: '+1',
      statusCallbackUrl: PUBLIC_STATUS_URL,
    },
    {
      ...recordingContext(),
      async reportStatus() {
        throw new Error('database unavailable');
      },
    },
  );
  await t.rejects(
    broken.routes![0]!.handler(request(PUBLIC_STATUS_URL, PUBLIC_STATUS_URL)),
    /database unavailable/,
    'a failed report is not swallowed',
  );
});

const NO_REPLY = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>';

t.test(
  "STOP and START texted to our numbers, through the fake Twilio's signed incoming-message webhook",
  async (t) => {
    const fake = new FakeTwilio();
    await fake.start();
    t.teardown(() => fake.stop());
    const ens = await ensWebhookServer(t);
    const ctx = recordingContext();
    const provider = await make(
      baseConfig(fake, { inboundUrl: ens.inboundUrl, statusCallbackUrl: ens.statusUrl }),
      ctx,
    );
    ens.mount(provider);
    const texter = '+15557651234';

    const stop = await fake.sendInbound(ens.inboundUrl, {
      from: texter,
      to: '+15005550006',
      body: 'STOP',
    });
    t.equal(stop.status, 200);
    t.equal(stop.body, NO_REPLY, 'an empty TwiML answer: Twilio confirms the STOP itself');
    t.match(stop.headers.get('content-type'), /^text\/xml/);
    t.equal(ctx.recipientReports.length, 1);
    const r = ctx.recipientReports[0]!;
    t.same(
      {
        kind: r.kind,
        address: r.address,
        channel: r.channel,
        sender: r.sender,
        providerMessageId: r.providerMessageId,
      },
      {
        kind: 'opt_out',
        address: texter,
        channel: 'sms',
        sender: { id: '+15005550006', isDefault: true },
        providerMessageId: undefined,
      },
    );
    t.match(
      r.detail,
      /^twilio inbound SM[0-9a-f]{32} to \+15005550006: text "STOP"$/,
      'the message and the words are the evidence',
    );
    t.ok(r.at instanceof Date && Math.abs(r.at.getTime() - Date.now()) < 5_000);

    // Twilio itself now refuses sends from that number to the texter; the plugin says why.
    const refused = await failure(provider.send(sms(texter)));
    t.equal(
      refused.recipientRefusal,
      'opt_out',
      'the fake Twilio blocks as Twilio does: 21610 after STOP',
    );

    for (const word of [
      'stopall',
      ' Unsubscribe ',
      'Cancel',
      'END',
      'quit.',
      'Revoke',
      'opt-out',
      'Stop all',
    ]) {
      await fake.sendInbound(ens.inboundUrl, { from: texter, to: '+15005550006', body: word });
      t.equal(ctx.recipientReports.at(-1)?.kind, 'opt_out', `"${word}" is an opt-out`);
    }
    const before = ctx.recipientReports.length;
    for (const word of ['START', 'yes', 'Unstop']) {
      await fake.sendInbound(ens.inboundUrl, { from: texter, to: '+15005550006', body: word });
      t.equal(ctx.recipientReports.at(-1)?.kind, 'opt_in', `"${word}" is an opt-in`);
    }
    t.equal(ctx.recipientReports.length, before + 3);
    t.ok(
      (await provider.send(sms(texter))).providerMessageId,
      'after START the fake Twilio sends again',
    );

    const toTenantNumber = await fake.sendInbound(ens.inboundUrl, {
      from: texter,
      to: '+15005550009',
      body: 'stop',
    });
    t.equal(toTenantNumber.status, 200);
    t.same(
      ctx.recipientReports.at(-1)?.sender,
      { id: '+15005550009', isDefault: false },
      'a STOP to another number binds only the tenants sending from it',
    );

    const advanced = await fake.sendInbound(ens.inboundUrl, {
      from: texter,
      to: '+15005550006',
      body: 'Arrêt',
      optOutType: 'STOP',
    });
    t.equal(advanced.status, 200);
    t.equal(
      ctx.recipientReports.at(-1)?.kind,
      'opt_out',
      "Advanced Opt-Out's OptOutType=STOP is an opt-out whatever the word",
    );
    t.match(ctx.recipientReports.at(-1)?.detail, /OptOutType STOP, text "Arrêt"/);
    await fake.sendInbound(ens.inboundUrl, {
      from: texter,
      to: '+15005550006',
      body: 'Oui',
      optOutType: 'START',
    });
    t.equal(ctx.recipientReports.at(-1)?.kind, 'opt_in', 'OptOutType=START is an opt-in');

    const count = ctx.recipientReports.length;
    for (const body of ['HELP', 'info', 'Please stop texting me at night', 'Thanks!', '']) {
      const res = await fake.sendInbound(ens.inboundUrl, {
        from: texter,
        to: '+15005550006',
        body,
      });
      t.equal(res.status, 200, `"${body}" answered`);
      t.equal(res.body, NO_REPLY, `"${body}": no reply without helpText`);
    }
    await fake.sendInbound(ens.inboundUrl, {
      from: texter,
      to: '+15005550006',
      body: 'anything',
      optOutType: 'HELP',
    });
    t.equal(ctx.recipientReports.length, count, 'HELP, INFO and other texts report nothing');

    const forged = await fake.sendInbound(
      ens.inboundUrl,
      { from: texter, to: '+15005550006', body: 'STOP' },
      { signWith: 'not-the-auth-token' },
    );
    t.equal(forged.status, 403, 'a forged STOP is refused');
    const unsigned = await fetch(ens.inboundUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(
        fake.inboundParams({ from: texter, to: '+15005550006', body: 'STOP' }),
      ).toString(),
    });
    t.equal(unsigned.status, 403, 'an unsigned STOP is refused');
    const otherUrl = await fake.sendStatusCallback(
      ens.statusUrl,
      fake.inboundParams({ from: texter, to: '+15005550006', body: 'STOP' }),
    );
    t.equal(
      otherUrl.status,
      200,
      'a STOP posted to the status route is no report (it has no MessageStatus)',
    );
    t.equal(
      ctx.recipientReports.length,
      count,
      'the forgeries and the misrouted post reported nothing',
    );
    t.ok(
      ctx.logs.some((l) => l.level === 'warn' && /inbound message refused/.test(l.msg ?? '')),
      'the refusal is logged',
    );
    t.notOk(JSON.stringify(ctx.logs).includes(fake.authToken), 'the auth token is never logged');
  },
);

t.test('inbound route details', async (t) => {
  const fake = new FakeTwilio();
  const PUBLIC_INBOUND_URL = 'https://ens.example.com/webhooks/twilio/inbound';
  const texter = '+15557651234';
  const request = (signedFor: string, arrivedAt: string, p: Record<string, string>) => ({
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': fake.sign(signedFor, p),
    },
    query: {},
    rawBody: Buffer.from(new URLSearchParams(p).toString()),
    url: arrivedAt,
  });
  // Not started: these call the route's handler directly.
  const cfg = { accountSid: fake.accountSid, authToken: fake.authToken, from: '+15005550006' };
  const inboundOf = (p: Provider) =>
    p.routes!.find((r) => r.path === '/inbound' && r.method === 'POST')!;

  t.test('behind a proxy, the configured public URL is the one verified', async (t) => {
    const ctx = recordingContext();
    const route = inboundOf(await make({ ...cfg, inboundUrl: PUBLIC_INBOUND_URL }, ctx));
    const stop = fake.inboundParams({ from: texter, to: '+15005550006', body: 'STOP' });
    t.equal(
      (
        await route.handler(
          request(PUBLIC_INBOUND_URL, 'http://10.0.0.7:8080/webhooks/twilio/inbound', stop),
        )
      ).status,
      200,
    );
    t.equal(
      (
        await route.handler(
          request(
            'http://10.0.0.7:8080/webhooks/twilio/inbound',
            'http://10.0.0.7:8080/webhooks/twilio/inbound',
            stop,
          ),
        )
      ).status,
      403,
    );
    t.equal(ctx.recipientReports.length, 1);
    const fallback = inboundOf(await make(cfg, ctx));
    const seen = 'https://ens.internal.test/webhooks/twilio/inbound';
    t.equal(
      (await fallback.handler(request(seen, seen, stop))).status,
      200,
      'without inboundUrl, the URL as ENS saw it is verified',
    );
    t.equal((await fallback.handler(request(PUBLIC_INBOUND_URL, seen, stop))).status, 403);
    t.equal(ctx.recipientReports.length, 2);
  });

  t.test(
    'a Messaging Service: a STOP to any of its numbers binds the tenants without a sender of ' +
      'their own',
    async (t) => {
      const ctx = recordingContext();
      const route = inboundOf(
        await make(
          {
            ...cfg,
            from: undefined,
            messagingServiceSid: SERVICE_SID,
            inboundUrl: PUBLIC_INBOUND_URL,
          },
          ctx,
        ),
      );
      await route.handler(
        request(
          PUBLIC_INBOUND_URL,
          PUBLIC_INBOUND_URL,
          fake.inboundParams({
            from: texter,
            to: '+15005550011',
            body: 'STOP',
            messagingServiceSid: SERVICE_SID,
          }),
        ),
      );
      t.same(ctx.recipientReports[0]?.sender, { id: '+15005550011', isDefault: true });
      await route.handler(
        request(
          PUBLIC_INBOUND_URL,
          PUBLIC_INBOUND_URL,
          fake.inboundParams({
            from: texter,
            to: '+15005550012',
            body: 'STOP',
            messagingServiceSid: `MG${'b2'.repeat(16)}`,
          }),
        ),
      );
      t.same(
        ctx.recipientReports[1]?.sender,
        { id: '+15005550012', isDefault: false },
        "another service's number is not ours by default",
      );
    },
  );

  t.test('HELP is answered with the configured help text, as TwiML', async (t) => {
    const ctx = recordingContext();
    const route = inboundOf(
      await make(
        {
          ...cfg,
          inboundUrl: PUBLIC_INBOUND_URL,
          helpText: 'Acme alerts: help at acme.example/help & <support>. Reply STOP to stop.',
        },
        ctx,
      ),
    );
    const res = await route.handler(
      request(
        PUBLIC_INBOUND_URL,
        PUBLIC_INBOUND_URL,
        fake.inboundParams({ from: texter, to: '+15005550006', body: 'Help' }),
      ),
    );
    t.equal(res.status, 200);
    t.equal(
      res.body,
      '<?xml version="1.0" encoding="UTF-8"?><Response><Message>Acme alerts: help at ' +
        'acme.example/help &amp; &lt;support&gt;. Reply STOP to stop.</Message></Response>',
    );
    t.equal(res.headers?.['content-type'], 'text/xml');
    const stop = await route.handler(
      request(
        PUBLIC_INBOUND_URL,
        PUBLIC_INBOUND_URL,
        fake.inboundParams({ from: texter, to: '+15005550006', body: 'STOP' }),
      ),
    );
    t.equal(stop.body, NO_REPLY, 'STOP gets no help text');
    t.equal(ctx.recipientReports.length, 1);
    t.throws(() => load({ ...cfg, helpText: '' }), /config \/helpText/);
    t.throws(() => load({ ...cfg, inboundUrl: 'not a url' }), /config \/inboundUrl/);
  });

  t.test('a keyword without an SMS sender reports nothing', async (t) => {
    const ctx = recordingContext();
    const route = inboundOf(await make({ ...cfg, inboundUrl: PUBLIC_INBOUND_URL }, ctx));
    const wa = fake.inboundParams({
      from: `whatsapp:${texter}`,
      to: 'whatsapp:+15005550006',
      body: 'STOP',
    });
    t.equal((await route.handler(request(PUBLIC_INBOUND_URL, PUBLIC_INBOUND_URL, wa))).status, 200);
    const { From: _from, ...noFrom } = fake.inboundParams({
      from: texter,
      to: '+15005550006',
      body: 'STOP',
    });
    t.equal(
      (await route.handler(request(PUBLIC_INBOUND_URL, PUBLIC_INBOUND_URL, noFrom))).status,
      200,
    );
    t.equal(ctx.recipientReports.length, 0);
  });

  t.test('a failed report is not swallowed', async (t) => {
    const route = inboundOf(
      await make(
        { ...cfg, inboundUrl: PUBLIC_INBOUND_URL },
        {
          ...recordingContext(),
          async reportRecipient() {
            throw new Error('database unavailable');
          },
        },
      ),
    );
    await t.rejects(
      route.handler(
        request(
          PUBLIC_INBOUND_URL,
          PUBLIC_INBOUND_URL,
          fake.inboundParams({ from: texter, to: '+15005550006', body: 'STOP' }),
        ),
      ),
      /database unavailable/,
    );
  });
});

t.test('conformance kit', async (t) => {
  // tap's ok() takes its message and extra as a tuple type that the kit's TapLike does not spell
  // out.
  const tap: TapLike = { ok: (value, message, extra) => t.ok(value, message ?? '', extra ?? {}) };
  await conformanceTest(tap, PKG, await import('../src/index.ts'), fixture);
});
