import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { classifyError, type Provider, type WebhookRoute } from '@ens/plugin-sdk';
import {
  conformanceTest,
  recordingContext,
  type RecordingContext,
} from '@ens/plugin-sdk/conformance';
import plugin from '../src/index.ts';
import fixture, { whatsappMessage } from '../src/conformance.ts';
import type { WhatsAppConfig } from '../src/config.ts';
import { classifyGraphAnswer } from '../src/graph-errors.ts';
import { hubSignature } from '../src/signature.ts';
import {
  CLOUD_API_ERRORS,
  FAKE_DEFAULTS,
  FAKE_RECIPIENTS,
  FakeGraph,
} from '../src/testing/fake-graph.ts';

const VERIFY = 'my-verify-token';
const SECOND_NUMBER = '109876543210987';

const fake = new FakeGraph({
  phoneNumbers: {
    [FAKE_DEFAULTS.phoneNumberId]: FAKE_DEFAULTS.displayPhoneNumber,
    [SECOND_NUMBER]: '15550002000',
  },
});
const graphUrl = await fake.start();
t.teardown(() => fake.stop());

function configFor(over: Partial<WhatsAppConfig> = {}): WhatsAppConfig {
  return {
    accessToken: fake.accessToken,
    phoneNumberId: FAKE_DEFAULTS.phoneNumberId,
    appSecret: fake.appSecret,
    verifyToken: VERIFY,
    graphUrl,
    apiVersion: 'v23.0',
    timeoutMs: 2_000,
    ...over,
  };
}

async function make(
  over: Partial<WhatsAppConfig> = {},
): Promise<{ provider: Provider; ctx: RecordingContext }> {
  const ctx = recordingContext();
  const provider = await plugin.create(configFor(over), ctx);
  return { provider, ctx };
}

async function failure(p: Promise<unknown>) {
  try {
    await p;
  } catch (e) {
    return {
      ...classifyError(e),
      classified: e !== null && typeof e === 'object' && 'ensErrorKind' in e,
    };
  }
  throw new Error('expected the send to fail');
}

const route = (provider: Provider, method: 'GET' | 'POST'): WebhookRoute => {
  const r = provider.routes?.find((x) => x.method === method && x.path === '/webhook');
  if (!r) throw new Error(`no ${method} /webhook route`);
  return r;
};

const invoke = (
  r: WebhookRoute,
  req: { query?: Record<string, string>; headers?: Record<string, string>; body?: string | Buffer },
) =>
  r.handler({
    query: req.query ?? {},
    headers: req.headers ?? {},
    rawBody:
      req.body === undefined
        ? Buffer.alloc(0)
        : Buffer.isBuffer(req.body)
          ? req.body
          : Buffer.from(req.body),
    url: 'https://ens.example/webhooks/whatsapp/webhook',
  });

t.test('send: exact request with body parameters and URL-button suffix', async (t) => {
  const { provider } = await make();
  const before = fake.received.length;
  const r = await provider.send(
    whatsappMessage('+15551234567', {
      body_params: ['Ada', 'A-1001'],
      url_button_suffix: 'track/A-1001',
    }),
  );
  const req = fake.received[before]!;
  t.equal(req.method, 'POST');
  t.equal(req.path, `/v23.0/${FAKE_DEFAULTS.phoneNumberId}/messages`);
  t.equal(req.headers.authorization, `Bearer ${fake.accessToken}`);
  t.match(req.headers['content-type'], /^application\/json/);
  t.same(
    JSON.parse(req.raw),
    {
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '15551234567',
      type: 'template',
      template: {
        name: 'order_update',
        language: { code: 'en_US' },
        components: [
          {
            type: 'body',
            parameters: [
              { type: 'text', text: 'Ada' },
              { type: 'text', text: 'A-1001' },
            ],
          },
          {
            type: 'button',
            sub_type: 'url',
            index: '0',
            parameters: [{ type: 'text', text: 'track/A-1001' }],
          },
        ],
      },
    },
    'the body is exactly the Cloud API template shape',
  );
  t.match(
    r.providerMessageId,
    /^wamid\.HBg[A-Za-z0-9+/=]+$/,
    'the provider message id is the wamid',
  );
  t.ok(fake.sent.has(r.providerMessageId), 'it is the id the fake answered with');
  t.equal(fake.sent.get(r.providerMessageId)?.to, '15551234567');
});

t.test('send: no components at all when there are no parameters and no button', async (t) => {
  const { provider } = await make();
  const before = fake.received.length;
  const msg = whatsappMessage('+15551234567', {
    template_name: 'hello_world',
    body_params: [],
    url_button_suffix: undefined,
  });
  const r = await provider.send(msg);
  t.same(JSON.parse(fake.received[before]!.raw), {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    to: '15551234567',
    type: 'template',
    template: { name: 'hello_world', language: { code: 'en_US' } },
  });
  t.notOk(
    'components' in (JSON.parse(fake.received[before]!.raw).template as object),
    'no empty components array',
  );
  t.match(r.providerMessageId, /^wamid\./);
});

t.test('send: body parameters only (no button component)', async (t) => {
  const { provider } = await make();
  const before = fake.received.length;
  await provider.send(
    whatsappMessage('+4915112345678', {
      template_name: 'otp_code',
      language: 'en',
      body_params: ['482913'],
      url_button_suffix: '',
    }),
  );
  const body = JSON.parse(fake.received[before]!.raw);
  t.equal(body.to, '4915112345678', 'E.164 digits without the +');
  t.same(body.template, {
    name: 'otp_code',
    language: { code: 'en' },
    components: [{ type: 'body', parameters: [{ type: 'text', text: '482913' }] }],
  });
});

t.test('send: the tenant setting whatsapp_phone_number_id chooses the sender', async (t) => {
  const { provider } = await make();
  const before = fake.received.length;
  const r = await provider.send({
    ...whatsappMessage('+15551234567'),
    tenantSettings: { whatsapp_phone_number_id: SECOND_NUMBER },
  });
  t.equal(fake.received[before]!.path, `/v23.0/${SECOND_NUMBER}/messages`);
  t.equal(fake.sent.get(r.providerMessageId)?.phoneNumberId, SECOND_NUMBER);

  const bad = await failure(
    provider.send({
      ...whatsappMessage('+15551234567'),
      tenantSettings: { whatsapp_phone_number_id: '../me' },
    }),
  );
  t.equal(bad.kind, 'permanent', 'a non-numeric id is refused before any request');
  t.match(bad.message, /whatsapp_phone_number_id/);

  const unknown = await failure(
    provider.send({
      ...whatsappMessage('+15551234567'),
      tenantSettings: { whatsapp_phone_number_id: '999000999' },
    }),
  );
  t.equal(unknown.kind, 'permanent', 'Graph code 100 for an id the token cannot use');
  t.match(
    unknown.message,
    /^whatsapp 100: Unsupported post request\. Object with ID '999000999' does not exist/,
  );
});

t.test('send: content without a template name is permanent, not sent', async (t) => {
  const { provider } = await make();
  const before = fake.received.length;
  const f = await failure(
    provider.send(whatsappMessage('+15551234567', { template_name: undefined })),
  );
  t.equal(f.kind, 'permanent');
  t.equal(f.message, 'whatsapp: content.template_name must be a non-empty string');
  t.equal(fake.received.length, before, 'nothing reached the provider');
  const p = await failure(provider.send(whatsappMessage('+15551234567', { body_params: [1, 2] })));
  t.equal(p.kind, 'permanent');
});

t.test('send: every error class through the fake Graph API', async (t) => {
  const { provider } = await make();
  const cases: [number, 'transient' | 'permanent' | 'rate_limited'][] = [
    [4, 'rate_limited'],
    [80007, 'rate_limited'],
    [130429, 'rate_limited'],
    [131048, 'rate_limited'],
    [131056, 'rate_limited'],
    [131000, 'transient'],
    [131016, 'transient'],
    [131026, 'permanent'],
    [131030, 'permanent'],
    [131047, 'permanent'],
    [131050, 'permanent'],
    [131051, 'permanent'],
    [133010, 'permanent'],
  ];
  for (const [code, kind] of cases) {
    const to = `1555${code}`.padEnd(11, '7');
    fake.recipientOutcomes.set(to, code);
    const f = await failure(provider.send(whatsappMessage(`+${to}`)));
    t.ok(f.classified, `${code}: a ProviderError`);
    t.equal(f.kind, kind, `${code} is ${kind}`);
    const spec = CLOUD_API_ERRORS[code]!;
    t.equal(
      f.message,
      `whatsapp ${code}: ${spec.message.replace(/^\(#\d+\) /, '')} (${spec.details})`,
      `${code}: the provider's reason`,
    );
  }
});

t.test(
  'send: refusals about the recipient carry their RecipientRefusal, so ENS suppresses the number',
  async (t) => {
    const { provider } = await make();
    const undeliverable = await failure(
      provider.send(whatsappMessage(`+${FAKE_RECIPIENTS.undeliverable}`)),
    );
    t.equal(undeliverable.kind, 'permanent');
    t.equal(
      undeliverable.recipientRefusal,
      'invalid_recipient',
      '131026 (not a WhatsApp user) → invalid_recipient',
    );
    const stopped = await failure(
      provider.send(whatsappMessage(`+${FAKE_RECIPIENTS.stoppedMarketing}`)),
    );
    t.equal(stopped.kind, 'permanent');
    t.equal(stopped.recipientRefusal, 'opt_out', '131050 (stopped marketing messages) → opt_out');
    t.equal(stopped.recipientEventTypeOnly, true, '131050 covers that kind of message only');
    t.equal(undeliverable.recipientEventTypeOnly, false, '131026 covers every message');
    t.equal(
      stopped.message,
      `whatsapp 131050: User stopped marketing messages (${CLOUD_API_ERRORS[131050]!.details})`,
    );
    // About the account or the message: the operator or another template fixes them.
    for (const code of [131030, 131047, 131051, 133010]) {
      const to = `1555${code}`.padEnd(11, '8');
      fake.recipientOutcomes.set(to, code);
      const f = await failure(provider.send(whatsappMessage(`+${to}`)));
      t.equal(f.kind, 'permanent', `${code} permanent`);
      t.equal(f.recipientRefusal, undefined, `${code} suppresses no one`);
    }
    const template = await failure(
      provider.send(whatsappMessage('+15551234567', { template_name: 'no_such_template' })),
    );
    t.equal(template.recipientRefusal, undefined, '132001 (no such template) suppresses no one');
    t.equal(
      classifyError(
        classifyGraphAnswer(500, JSON.stringify({ error: { code: 131026, message: 'x' } }), null),
      ).recipientRefusal,
      'invalid_recipient',
      "Meta's code decides, not the HTTP status",
    );
  },
);

t.test('send: the exact last_error for an undeliverable recipient', async (t) => {
  const { provider } = await make();
  const f = await failure(provider.send(whatsappMessage(`+${FAKE_RECIPIENTS.undeliverable}`)));
  t.equal(f.kind, 'permanent');
  t.equal(
    f.message,
    'whatsapp 131026: Message undeliverable (Unable to deliver message. Reasons can include: ' +
      'the recipient phone number is not a WhatsApp phone number.)',
  );
  const r = await failure(provider.send(whatsappMessage(`+${FAKE_RECIPIENTS.pairRate}`)));
  t.equal(r.kind, 'rate_limited');
  t.equal(r.retryAfterMs, undefined, 'Meta gives no retry hint; the worker backs off');
});

t.test('send: template errors (unknown template, parameter count, missing button)', async (t) => {
  const { provider } = await make();
  const unknown = await failure(
    provider.send(whatsappMessage('+15551234567', { template_name: 'no_such_template' })),
  );
  t.equal(unknown.kind, 'permanent');
  t.equal(
    unknown.message,
    'whatsapp 132001: Template name does not exist in the translation (template name ' +
      '(no_such_template) does not exist in en_US)',
  );
  const lang = await failure(provider.send(whatsappMessage('+15551234567', { language: 'fr' })));
  t.equal(lang.kind, 'permanent');
  t.match(lang.message, /^whatsapp 132001: .*does not exist in fr\)$/);
  const count = await failure(
    provider.send(whatsappMessage('+15551234567', { body_params: ['only one'] })),
  );
  t.equal(count.kind, 'permanent');
  t.equal(
    count.message,
    'whatsapp 132000: Number of parameters does not match the expected number of params (body: ' +
      'number of localizable_params (1) does not match the expected number of params (2))',
  );
  const button = await failure(
    provider.send(whatsappMessage('+15551234567', { url_button_suffix: undefined })),
  );
  t.equal(button.kind, 'permanent');
  t.match(
    button.message,
    /^whatsapp 131008: Required parameter is missing \(buttons: Button at index 0/,
  );
});

t.test('send: a wrong token is a transient (configuration) failure with 190', async (t) => {
  const { provider } = await make({ accessToken: 'EAAG-wrong' });
  const before = fake.received.length;
  const f = await failure(provider.send(whatsappMessage('+15551234567')));
  t.equal(f.kind, 'transient');
  t.match(f.message, /^whatsapp 190: Invalid OAuth access token - Cannot parse access token/);
  t.equal(fake.received[before]!.headers.authorization, 'Bearer EAAG-wrong');
});

t.test('send: a Graph API that never answers is a transient timeout', async (t) => {
  const { provider } = await make({ timeoutMs: 300 });
  const started = Date.now();
  const f = await failure(provider.send(whatsappMessage(`+${FAKE_RECIPIENTS.hang}`)));
  t.equal(f.kind, 'transient');
  t.match(f.message, /no answer within 300 ms/);
  t.ok(Date.now() - started < 2_000, 'gave up at the configured timeout');
});

t.test('send: a refused connection is transient', async (t) => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const { provider } = await make({ graphUrl: `http://127.0.0.1:${port}` });
  const f = await failure(provider.send(whatsappMessage('+15551234567')));
  t.equal(f.kind, 'transient');
  t.match(f.message, /^whatsapp: POST http:\/\/127\.0\.0\.1:\d+\/v23\.0\/\d+\/messages failed/);
});

t.test('classification of Graph answers the fake does not produce', async (t) => {
  const body = (code: number, message = `(#${code}) Some message`, details?: string) =>
    JSON.stringify({
      error: {
        message,
        type: 'OAuthException',
        code,
        ...(details ? { error_data: { messaging_product: 'whatsapp', details } } : {}),
        fbtrace_id: 'AbC',
      },
    });
  const kind = (status: number, text: string, retryAfter: string | null = null) =>
    classifyError(classifyGraphAnswer(status, text, retryAfter));
  t.equal(kind(500, body(1, 'An unknown error occurred')).kind, 'transient', 'code 1');
  t.equal(kind(503, body(2, 'Service temporarily unavailable')).kind, 'transient', 'code 2');
  t.equal(kind(400, body(0, 'AuthException')).kind, 'transient', 'code 0 is a configuration fault');
  t.equal(kind(400, body(3, 'Capability or permissions issue')).kind, 'transient', 'code 3');
  t.equal(kind(403, body(10, 'Permission denied')).kind, 'transient', 'code 10');
  t.equal(
    kind(401, body(190, 'Error validating access token: Session has expired')).kind,
    'transient',
    'code 190',
  );
  t.equal(kind(401, '').kind, 'transient', 'bare HTTP 401');
  for (const code of [100, 131008, 131009, 132005, 132007, 132012]) {
    const c = kind(400, body(code, `(#${code}) Reason ${code}`, `Details ${code}`));
    t.equal(c.kind, 'permanent', `code ${code}`);
    t.equal(c.message, `whatsapp ${code}: Reason ${code} (Details ${code})`);
  }
  t.equal(kind(400, body(999001, 'Something new')).kind, 'permanent', 'unknown code with 4xx');
  t.equal(kind(502, body(999001, 'Something new')).kind, 'transient', 'unknown code with 5xx');
  t.equal(kind(404, 'Not Found').kind, 'permanent', 'unknown 4xx without a Graph body');
  t.equal(kind(404, 'Not Found').message, 'whatsapp HTTP 404: Not Found');
  t.equal(kind(502, '<html>bad gateway</html>').kind, 'transient', 'a proxy 502');
  const limited = kind(429, '', '7');
  t.equal(limited.kind, 'rate_limited', 'bare HTTP 429');
  t.equal(limited.retryAfterMs, 7_000, 'Retry-After honoured when present');
  t.equal(kind(400, body(130429, '(#130429) Rate limit hit'), '2').retryAfterMs, 2_000);
});

t.test('checkCredentials', async (t) => {
  const { provider } = await make();
  const before = fake.received.length;
  await provider.checkCredentials!();
  const req = fake.received[before]!;
  t.equal(req.method, 'GET');
  t.equal(req.path, `/v23.0/${FAKE_DEFAULTS.phoneNumberId}`);
  t.same(req.query, { fields: 'display_phone_number' });
  t.equal(req.headers.authorization, `Bearer ${fake.accessToken}`);

  const wrong = await make({ accessToken: 'EAAG-wrong' });
  const f = await failure(wrong.provider.checkCredentials!());
  t.equal(f.kind, 'transient');
  t.match(f.message, /^whatsapp 190:/);

  const otherId = await make({ phoneNumberId: '123123123' });
  const g = await failure(otherId.provider.checkCredentials!());
  t.match(g.message, /^whatsapp 100: Unsupported get request\. Object with ID '123123123'/);
});

t.test('webhook GET: subscription challenge', async (t) => {
  const { provider, ctx } = await make();
  const get = route(provider, 'GET');
  const ok = await invoke(get, {
    query: { 'hub.mode': 'subscribe', 'hub.verify_token': VERIFY, 'hub.challenge': '1158201444' },
  });
  t.equal(ok.status, 200);
  t.equal(ok.body, '1158201444', 'answers with hub.challenge as is');
  t.match(ok.headers?.['content-type'], /^text\/plain/);
  const refused: Record<string, string>[] = [
    { 'hub.mode': 'subscribe', 'hub.verify_token': 'guess', 'hub.challenge': '1' },
    { 'hub.mode': 'subscribe', 'hub.verify_token': `${VERIFY}x`, 'hub.challenge': '1' },
    { 'hub.mode': 'unsubscribe', 'hub.verify_token': VERIFY, 'hub.challenge': '1' },
    { 'hub.mode': 'subscribe', 'hub.challenge': '1' },
    {},
  ];
  for (const query of refused) {
    const res = await invoke(get, { query });
    t.equal(res.status, 403, `refused: ${JSON.stringify(query)}`);
    t.not(res.body, '1', 'the challenge is not echoed');
  }
  t.equal(ctx.reports.length, 0);
});

t.test('webhook POST: genuine statuses are reported', async (t) => {
  const { provider, ctx } = await make();
  const post = route(provider, 'POST');
  const wamid = (await provider.send(whatsappMessage('+15551234567'))).providerMessageId;

  const delivered = fake.statusWebhook([
    { id: wamid, status: 'delivered', timestamp: 1_700_000_000 },
  ]);
  const r1 = await invoke(post, { headers: delivered.headers, body: delivered.body });
  t.equal(r1.status, 200);
  t.same(ctx.reports, [
    { providerMessageId: wamid, status: 'delivered', at: new Date(1_700_000_000_000) },
  ]);

  const read = fake.statusWebhook([{ id: wamid, status: 'read', timestamp: 1_700_000_060 }]);
  t.equal((await invoke(post, { headers: read.headers, body: read.body })).status, 200);
  t.same(ctx.reports[1], {
    providerMessageId: wamid,
    status: 'read',
    at: new Date(1_700_000_060_000),
  });

  const sent = fake.statusWebhook([{ id: wamid, status: 'sent', timestamp: 1_699_999_990 }]);
  t.equal((await invoke(post, { headers: sent.headers, body: sent.body })).status, 200);
  t.equal(ctx.reports.length, 2, '"sent" is not reported');

  const failed = fake.statusWebhook([
    { id: wamid, status: 'failed', timestamp: 1_700_000_100, errorCode: 131047 },
  ]);
  t.equal((await invoke(post, { headers: failed.headers, body: failed.body })).status, 200);
  t.same(ctx.reports[2], {
    providerMessageId: wamid,
    status: 'failed',
    at: new Date(1_700_000_100_000),
    error:
      'whatsapp 131047: Re-engagement message (Message failed to send because more than 24 ' +
      'hours have passed since the customer last replied to this number.)',
  });
});

t.test(
  'webhook POST: a failed status about the recipient also reports the recipient',
  async (t) => {
    const { provider, ctx } = await make();
    const post = route(provider, 'POST');
    const sendTo = async (n: string) => (await provider.send(whatsappMessage(n))).providerMessageId;
    const a = await sendTo('+15551234567');
    const b = await sendTo('+15551234568');
    const c = await sendTo('+15551234569');

    const notOnWhatsApp = fake.statusWebhook([
      { id: a, status: 'failed', timestamp: 1_700_000_100, errorCode: 131026 },
    ]);
    t.equal(
      (await invoke(post, { headers: notOnWhatsApp.headers, body: notOnWhatsApp.body })).status,
      200,
    );
    const error131026 = `whatsapp 131026: Message undeliverable (${CLOUD_API_ERRORS[131026]!.details})`;
    t.same(
      ctx.reports,
      [
        {
          providerMessageId: a,
          status: 'failed',
          at: new Date(1_700_000_100_000),
          error: error131026,
        },
      ],
      'the status is reported as before',
    );
    t.same(
      ctx.recipientReports,
      [
        {
          kind: 'invalid_recipient',
          eventTypeOnly: false,
          providerMessageId: a,
          at: new Date(1_700_000_100_000),
          detail: error131026,
        },
      ],
      "and the recipient, with Meta's words as evidence",
    );

    const batch = fake.statusWebhook([
      { id: b, status: 'failed', timestamp: 1_700_000_200, errorCode: 131050 },
      { id: c, status: 'failed', timestamp: 1_700_000_201, errorCode: 131047 },
      { id: c, status: 'delivered', timestamp: 1_700_000_202 },
    ]);
    t.equal((await invoke(post, { headers: batch.headers, body: batch.body })).status, 200);
    t.equal(ctx.reports.length, 4, 'every status reported');
    t.equal(
      ctx.recipientReports.length,
      2,
      'only the refusal about the recipient reports it: not 131047, not delivered',
    );
    t.match(ctx.recipientReports[1], {
      kind: 'opt_out',
      eventTypeOnly: true,
      providerMessageId: b,
      detail: /^whatsapp 131050: User stopped marketing messages/,
    });
    t.match(ctx.recipientReports[0], { eventTypeOnly: false });

    // An error list naming several causes: the first one about the recipient counts.
    const several = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: fake.wabaId,
          changes: [
            {
              field: 'messages',
              value: {
                statuses: [
                  {
                    id: c,
                    status: 'failed',
                    timestamp: '1700000300',
                    errors: [
                      { code: 131000, title: 'Something went wrong' },
                      { code: '131026', title: 'Message undeliverable' },
                    ],
                  },
                ],
              },
            },
          ],
        },
      ],
    });
    t.equal(
      (
        await invoke(post, {
          headers: { 'x-hub-signature-256': hubSignature(several, fake.appSecret) },
          body: several,
        })
      ).status,
      200,
    );
    t.match(ctx.recipientReports[2], {
      kind: 'invalid_recipient',
      providerMessageId: c,
      detail: 'whatsapp 131000: Something went wrong; whatsapp 131026: Message undeliverable',
    });

    const forged = fake.statusWebhook([{ id: a, status: 'failed', errorCode: 131026 }], {
      appSecret: 'guessed',
    });
    t.equal((await invoke(post, { headers: forged.headers, body: forged.body })).status, 401);
    t.equal(ctx.recipientReports.length, 3, 'a forged failure reports no recipient');
  },
);

t.test('webhook POST: a recipient report the core cannot record asks Meta to retry', async (t) => {
  const ctx = recordingContext();
  const failing = {
    ...ctx,
    reportRecipient: async () => {
      throw new Error('database unavailable');
    },
  };
  const provider = await plugin.create(configFor(), failing);
  const hook = fake.statusWebhook([{ id: 'wamid.Z', status: 'failed', errorCode: 131026 }]);
  const res = await invoke(route(provider, 'POST'), { headers: hook.headers, body: hook.body });
  t.equal(res.status, 500);
  t.equal(
    ctx.reports.length,
    1,
    "the status was recorded first; Meta's retry repeats it harmlessly",
  );
  t.ok(
    ctx.logs.some((l) => l.level === 'error' && /refused recipient/.test(l.msg ?? '')),
    'logged',
  );
});

t.test(
  'webhook POST: out-of-order and repeated statuses are reported in arrival order',
  async (t) => {
    const { provider, ctx } = await make();
    const post = route(provider, 'POST');
    const id = 'wamid.HBgLMTU1NTEyMzQ1NjcVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA';
    const read = fake.statusWebhook([{ id, status: 'read', timestamp: 1_700_000_020 }]);
    const delivered = fake.statusWebhook([{ id, status: 'delivered', timestamp: 1_700_000_010 }]);
    await invoke(post, { headers: read.headers, body: read.body });
    await invoke(post, { headers: delivered.headers, body: delivered.body });
    await invoke(post, { headers: delivered.headers, body: delivered.body });
    t.same(
      ctx.reports.map((r) => [r.status, r.at.getTime()]),
      [
        ['read', 1_700_000_020_000],
        ['delivered', 1_700_000_010_000],
        ['delivered', 1_700_000_010_000],
      ],
    );

    // Several statuses in one post, as Meta batches them.
    const batch = fake.statusWebhook([
      { id: 'wamid.A', status: 'read', timestamp: 1_700_000_040 },
      { id: 'wamid.B', status: 'delivered', timestamp: 1_700_000_030 },
      { id: 'wamid.A', status: 'delivered', timestamp: 1_700_000_035 },
    ]);
    const res = await invoke(post, { headers: batch.headers, body: batch.body });
    t.equal(res.status, 200, 'unknown wamids are still answered 200');
    t.same(
      ctx.reports.slice(3).map((r) => `${r.providerMessageId}:${r.status}`),
      ['wamid.A:read', 'wamid.B:delivered', 'wamid.A:delivered'],
    );
  },
);

t.test(
  'webhook POST: inbound messages and other objects are acknowledged without reports',
  async (t) => {
    const { provider, ctx } = await make();
    const post = route(provider, 'POST');
    const inbound = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: fake.wabaId,
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: {
                  display_phone_number: FAKE_DEFAULTS.displayPhoneNumber,
                  phone_number_id: FAKE_DEFAULTS.phoneNumberId,
                },
                contacts: [{ profile: { name: 'Ada' }, wa_id: '15551234567' }],
                messages: [
                  {
                    from: '15551234567',
                    id: 'wamid.IN',
                    timestamp: '1700000000',
                    type: 'text',
                    text: { body: 'hi' },
                  },
                ],
              },
            },
          ],
        },
      ],
    });
    const r1 = await invoke(post, {
      headers: { 'x-hub-signature-256': hubSignature(inbound, fake.appSecret) },
      body: inbound,
    });
    t.equal(r1.status, 200);
    const page = JSON.stringify({ object: 'page', entry: [] });
    const r2 = await invoke(post, {
      headers: { 'x-hub-signature-256': hubSignature(page, fake.appSecret) },
      body: page,
    });
    t.equal(r2.status, 200);
    const template = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: '1',
          changes: [{ field: 'message_template_status_update', value: { event: 'APPROVED' } }],
        },
      ],
    });
    const r3 = await invoke(post, {
      headers: { 'x-hub-signature-256': hubSignature(template, fake.appSecret) },
      body: template,
    });
    t.equal(r3.status, 200);
    t.equal(ctx.reports.length, 0);
  },
);

t.test('webhook POST: forged requests are refused with 401 and report nothing', async (t) => {
  const { provider, ctx } = await make();
  const post = route(provider, 'POST');
  const genuine = fake.statusWebhook([
    { id: 'wamid.X', status: 'delivered', timestamp: 1_700_000_000 },
  ]);
  const forgedSecret = fake.statusWebhook(
    [{ id: 'wamid.X', status: 'delivered', timestamp: 1_700_000_000 }],
    { appSecret: 'guessed' },
  );
  const otherBody = fake.statusWebhook([
    { id: 'wamid.X', status: 'read', timestamp: 1_700_000_000 },
  ]);
  const cases: [string, Record<string, string>, string | Buffer][] = [
    ['signed with another secret', forgedSecret.headers, forgedSecret.body],
    ['no signature header', { 'content-type': 'application/json' }, genuine.body],
    ['signature over different bytes', otherBody.headers, genuine.body],
    [
      'a different body under a genuine header',
      genuine.headers,
      genuine.body.replace('delivered', 'read'),
    ],
    ['a sha1 signature', { 'x-hub-signature-256': `sha1=${'0'.repeat(40)}` }, genuine.body],
    [
      'a truncated signature',
      { 'x-hub-signature-256': genuine.headers['x-hub-signature-256']!.slice(0, 40) },
      genuine.body,
    ],
    ['empty body, genuine header', genuine.headers, Buffer.alloc(0)],
  ];
  for (const [name, headers, body] of cases) {
    const res = await invoke(post, { headers, body });
    t.equal(res.status, 401, name);
  }
  t.equal(ctx.reports.length, 0, 'no forged request produced a report');
  const ok = await invoke(post, { headers: genuine.headers, body: genuine.body });
  t.equal(ok.status, 200, 'the genuine one still passes');
});

t.test('webhook POST: a status the core cannot record asks Meta to retry', async (t) => {
  const ctx = recordingContext();
  const failing = {
    ...ctx,
    reportStatus: async () => {
      throw new Error('database unavailable');
    },
  };
  const provider = await plugin.create(configFor(), failing);
  const hook = fake.statusWebhook([{ id: 'wamid.Y', status: 'delivered' }]);
  const res = await invoke(route(provider, 'POST'), { headers: hook.headers, body: hook.body });
  t.equal(res.status, 500);
  t.ok(
    ctx.logs.some((l) => l.level === 'error'),
    'logged',
  );
});

t.test(
  'the fake posts a real signed webhook over HTTP (and auto-reports after a send)',
  async (t) => {
    const { provider, ctx } = await make();
    const post = route(provider, 'POST');
    // A minimal stand-in for ENS's webhook server: raw bytes in, the route's answer out.
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const headers = Object.fromEntries(
        Object.entries(req.headers).map(([k, v]) => [
          k,
          Array.isArray(v) ? v.join(',') : (v ?? ''),
        ]),
      );
      const out = await invoke(post, { headers, body: Buffer.concat(chunks) });
      res.writeHead(out.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(out.body ?? null));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(
      () =>
        new Promise<void>((r) => {
          server.closeAllConnections(); // fetch keeps sockets alive; without this close() waits for them
          server.close(() => r());
        }),
    );
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/whatsapp/webhook`;

    const wamid = (await provider.send(whatsappMessage('+15551234567'))).providerMessageId;
    const r = await fake.postStatusWebhook(url, [
      { id: wamid, status: 'delivered', timestamp: 1_700_000_000 },
    ]);
    t.equal(r.status, 200);
    t.same(ctx.reports[0], {
      providerMessageId: wamid,
      status: 'delivered',
      at: new Date(1_700_000_000_000),
    });
    const forged = await fake.postStatusWebhook(url, [{ id: wamid, status: 'read' }], {
      appSecret: 'wrong',
    });
    t.equal(forged.status, 401);
    t.equal(ctx.reports.length, 1);

    fake.autoReport = { url, statuses: ['delivered', 'read'], delayMs: 20 };
    t.teardown(() => {
      fake.autoReport = undefined;
    });
    const second = (await provider.send(whatsappMessage('+15557654321'))).providerMessageId;
    const read = await ctx.waitForReport(
      (u) => u.providerMessageId === second && u.status === 'read',
      5_000,
    );
    t.ok(read, 'delivered and read arrived for the second send');
    t.ok(ctx.reports.some((u) => u.providerMessageId === second && u.status === 'delivered'));
  },
);

t.test('conformance kit', async (t) => {
  // The SDK's TapLike declares ok(value, message?, extra?), which tap 21's stricter overloads do
  // not accept as is; the adapter passes the same arguments through.
  const tapLike = {
    ok: (value: unknown, message?: string, extra?: object) =>
      t.ok(value, message ?? '', extra ?? {}),
  };
  await conformanceTest(tapLike, '@ens/plugin-whatsapp', await import('../src/index.ts'), fixture);
});
