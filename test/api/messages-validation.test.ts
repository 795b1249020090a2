import t, { type Test } from 'tap';
import { startTestService, smsHandoff, uniqueKey, type ApiResponse } from '../harness/service.ts';

/**
 * POST /v2/messages: every rule of the spec's tables and of issue 2. Each rejected request is
 * shown to change nothing (no handoff, delivery or idempotency key stored), and its
 * Idempotency-Key is then accepted for a valid request as a new handoff.
 */
const MAX_RECIPIENTS = 5;
const MAX_IMAGE_BYTES = 1024;
const MAX_BODY_BYTES = 64 * 1024;

const PNG_1x1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

type Body = Record<string, unknown>;
const entry = (channel: string, recipients: string[], content: Body): Body => ({
  channel,
  recipients,
  content,
});
const handoff = (...messages: Body[]): Body => ({
  tenant: 'acme',
  event_type: 'order.shipped',
  messages,
});
const sms = (recipients: string[], content: Body = {}) =>
  entry('sms', recipients, { kind: 'rendered', body: 'hi', ...content });
const email = (recipients: string[], content: Body = {}) =>
  entry('email', recipients, { kind: 'rendered', body: 'hi', ...content });
const push = (recipients: string[], content: Body = {}) =>
  entry('push', recipients, { kind: 'rendered', body: 'hi', ...content });
const whatsapp = (recipients: string[], content: Body = {}) =>
  entry('whatsapp', recipients, {
    kind: 'template',
    template_name: 'order_shipped',
    language: 'en',
    ...content,
  });

t.test('POST /v2/messages validation', async (t) => {
  const svc = await startTestService(t, {
    env: {
      ENS_MAX_RECIPIENTS: String(MAX_RECIPIENTS),
      ENS_MAX_IMAGE_BYTES: String(MAX_IMAGE_BYTES),
      ENS_MAX_BODY_BYTES: String(MAX_BODY_BYTES),
      ENS_ALLOW_PRIVATE_CALLBACKS: 'false',
    },
  });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');

  const counts = async () =>
    (
      await svc.rt.db.query(
        `SELECT (SELECT count(*)::int FROM handoffs) AS handoffs, (SELECT count(*)::int FROM deliveries) AS deliveries,
                (SELECT count(*)::int FROM idempotency_keys) AS keys`,
      )
    ).rows[0];

  const post = (
    body: unknown,
    headers: Record<string, string> = { 'idempotency-key': uniqueKey() },
  ) => client.call('POST', '/v2/messages', { body, headers });

  /** A valid send with `key` is a new handoff: proof that the rejected request kept nothing. */
  const keyStillFree = async (t: Test, key: string) => {
    const r = await post(smsHandoff('acme', ['+15551239999']), { 'idempotency-key': key });
    t.equal(r.status, 202, "the rejected request's Idempotency-Key is free for a valid request");
    t.equal(r.headers.get('idempotent-replayed'), null, 'as a new handoff, not a replay');
  };

  /**
   * Sends `body` (or a raw string), expects `status` and `code`, an error at `path` when given,
   * and no change to the stored state.
   */
  const rejects = async (
    t: Test,
    name: string,
    body: unknown,
    want: {
      status?: number;
      code?: string;
      path?: string;
      detail?: RegExp;
      raw?: string;
      contentType?: string;
      withoutKey?: boolean;
    },
  ): Promise<ApiResponse> => {
    const key = uniqueKey('rejected');
    const keyHeader: Record<string, string> = want.withoutKey ? {} : { 'idempotency-key': key };
    const before = await counts();
    const r =
      want.raw !== undefined
        ? await svc.request('POST', '/v2/messages', {
            raw: want.raw,
            headers: {
              authorization: `Bearer ${await client.token()}`,
              'content-type': want.contentType ?? 'application/json',
              ...keyHeader,
            },
          })
        : await post(body, keyHeader);
    t.equal(r.status, want.status ?? 400, `${name}: status`);
    t.equal(r.body?.code, want.code ?? 'ENS_ERR_VALIDATION', `${name}: code`);
    t.type(r.body?.detail, 'string', `${name}: detail`);
    if (want.detail) t.match(r.body?.detail, want.detail, `${name}: detail says why`);
    if (want.path !== undefined) {
      const paths = (r.body?.errors ?? []).map((e: { path: string }) => e.path);
      t.ok(
        paths.includes(want.path),
        `${name}: an error at ${want.path} (got ${JSON.stringify(r.body?.errors)})`,
      );
      for (const e of r.body?.errors ?? []) t.type(e.message, 'string');
    }
    t.same(await counts(), before, `${name}: nothing stored`);
    if (!want.withoutKey) await keyStillFree(t, key);
    return r;
  };

  t.test('the 202 body', async (t) => {
    const key = uniqueKey();
    const r = await post(
      {
        tenant: 'acme',
        event_type: 'order.shipped',
        reference: 'order-42',
        messages: [sms(['+15551230001', '+15551230002']), email(['ann@example.com'])],
      },
      { 'idempotency-key': key },
    );
    t.equal(r.status, 202);
    t.match(r.headers.get('content-type'), /^application\/json/);
    t.same(Object.keys(r.body).sort(), [
      'deliveries',
      'event_type',
      'handoff_id',
      'reference',
      'status',
      'tenant',
    ]);
    t.equal(r.body.tenant, 'acme');
    t.equal(r.body.event_type, 'order.shipped');
    t.equal(r.body.reference, 'order-42');
    t.equal(r.body.status, 'pending');
    t.type(r.body.handoff_id, 'string');
    t.equal(r.body.deliveries.length, 3, 'one delivery per recipient per channel');
    for (const d of r.body.deliveries) {
      t.same(Object.keys(d).sort(), ['channel', 'delivery_id', 'recipient', 'status']);
      t.equal(d.status, 'pending');
    }
    t.same(
      r.body.deliveries
        .map((d: { channel: string; recipient: string }) => `${d.channel}:${d.recipient}`)
        .sort(),
      ['email:ann@example.com', 'sms:+15551230001', 'sms:+15551230002'],
    );
    t.equal(
      new Set(r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id)).size,
      3,
      'distinct delivery ids',
    );
    const stored = await svc.rt.db.query(
      'SELECT id::text, channel, recipient, status FROM deliveries WHERE handoff_id = $1 ORDER ' +
        'BY id',
      [r.body.handoff_id],
    );
    t.same(
      stored.rows.map((row) => row.id).sort(),
      r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id).sort(),
      'the deliveries in the body are the ones stored',
    );

    const noRef = await post(smsHandoff('acme', ['+15551230003']));
    t.equal(noRef.status, 202);
    t.equal(noRef.body.reference, null, 'reference is null when not given');
  });

  t.test('every channel with valid content is accepted', async (t) => {
    const r = await post(
      handoff(
        sms(['+15551230001']),
        email(['ann@example.com'], {
          subject: 'Shipped',
          html: '<p>hi <img src="cid:logo"></p>',
          inline_images: [{ cid: 'logo', media_type: 'image/png', data: PNG_1x1 }],
        }),
        push(['user-1'], { subject: 'Shipped', data: { order: '42' } }),
        whatsapp(['+15551230001'], { body_params: ['Ann', '42'], url_button_suffix: 'orders/42' }),
      ),
    );
    t.equal(r.status, 202);
    t.same(r.body.deliveries.map((d: { channel: string }) => d.channel).sort(), [
      'email',
      'push',
      'sms',
      'whatsapp',
    ]);
  });

  t.test('inline images are moved to storage on receipt', async (t) => {
    const r = await post(
      handoff(
        email(['ann@example.com'], {
          html: '<img src="cid:logo">',
          inline_images: [{ cid: 'logo', data: PNG_1x1 }],
        }),
      ),
    );
    t.equal(r.status, 202);
    const { rows } = await svc.rt.db.query('SELECT messages FROM handoffs WHERE id = $1', [
      r.body.handoff_id,
    ]);
    const image = rows[0].messages.email.inline_images[0];
    t.equal(image.cid, 'logo');
    t.equal(image.media_type, 'image/png', 'media_type defaults to image/png');
    t.notOk('data' in image, 'the stored handoff carries no base64');
    const stored = await svc.rt.media.get(image.storage_key);
    t.same(stored.bytes, Buffer.from(PNG_1x1, 'base64'), 'the bytes are in media storage');
  });

  t.test('a repeated channel', (t) =>
    rejects(t, 'two sms entries', handoff(sms(['+15551230001']), sms(['+15551230002'])), {
      path: '/messages/1/channel',
      detail: /sms/,
    }).then(() => {}),
  );

  t.test('content kind must fit the channel', async (t) => {
    await rejects(
      t,
      'rendered on whatsapp',
      handoff(entry('whatsapp', ['+15551230001'], { kind: 'rendered', body: 'hi' })),
      { path: '/messages/0/content/kind' },
    );
    await rejects(
      t,
      'template on sms',
      handoff(
        entry('sms', ['+15551230001'], { kind: 'template', template_name: 'x', language: 'en' }),
      ),
      { path: '/messages/0/content/kind' },
    );
    await rejects(
      t,
      'template on email',
      handoff(entry('email', ['a@example.com'], { kind: 'template', body: 'hi' })),
      { path: '/messages/0/content/kind' },
    );
    await rejects(
      t,
      'template on push',
      handoff(entry('push', ['u1'], { kind: 'template', body: 'hi' })),
      { path: '/messages/0/content/kind' },
    );
    await rejects(
      t,
      'an unknown kind',
      handoff(entry('sms', ['+15551230001'], { kind: 'fancy', body: 'hi' })),
      { path: '/messages/0/content/kind' },
    );
  });

  t.test('required content', async (t) => {
    await rejects(
      t,
      'sms rendered without body',
      handoff(entry('sms', ['+15551230001'], { kind: 'rendered' })),
      { path: '/messages/0/content/body' },
    );
    await rejects(
      t,
      'email rendered without body',
      handoff(entry('email', ['a@example.com'], { kind: 'rendered', html: '<p>x</p>' })),
      { path: '/messages/0/content/body' },
    );
    await rejects(
      t,
      'push rendered without body',
      handoff(entry('push', ['u1'], { kind: 'rendered', subject: 'x' })),
      { path: '/messages/0/content/body' },
    );
    await rejects(t, 'an empty body', handoff(sms(['+15551230001'], { body: '' })), {
      path: '/messages/0/content/body',
    });
    await rejects(
      t,
      'whatsapp without template_name',
      handoff(entry('whatsapp', ['+15551230001'], { kind: 'template', language: 'en' })),
      { path: '/messages/0/content/template_name' },
    );
    await rejects(
      t,
      'whatsapp without language',
      handoff(entry('whatsapp', ['+15551230001'], { kind: 'template', template_name: 't' })),
      { path: '/messages/0/content/language' },
    );
    await rejects(t, 'content missing', handoff({ channel: 'sms', recipients: ['+15551230001'] }), {
      path: '/messages/0/content',
    });
    await rejects(t, 'kind missing', handoff(entry('sms', ['+15551230001'], { body: 'hi' })), {
      path: '/messages/0/content/kind',
    });
  });

  t.test('body_params: no newline, no tab, no run of four or more spaces', async (t) => {
    await rejects(
      t,
      'a newline',
      handoff(whatsapp(['+15551230001'], { body_params: ['ok', 'two\nlines'] })),
      { path: '/messages/0/content/body_params/1' },
    );
    await rejects(
      t,
      'a carriage return and newline',
      handoff(whatsapp(['+15551230001'], { body_params: ['a\r\nb'] })),
      { path: '/messages/0/content/body_params/0' },
    );
    await rejects(t, 'a tab', handoff(whatsapp(['+15551230001'], { body_params: ['a\tb'] })), {
      path: '/messages/0/content/body_params/0',
    });
    await rejects(
      t,
      'four spaces',
      handoff(whatsapp(['+15551230001'], { body_params: ['a    b'] })),
      { path: '/messages/0/content/body_params/0' },
    );
    await rejects(
      t,
      'five spaces',
      handoff(whatsapp(['+15551230001'], { body_params: ['a     b'] })),
      { path: '/messages/0/content/body_params/0' },
    );
    const three = await post(
      handoff(whatsapp(['+15551230001'], { body_params: ['a   b', ' leading', 'trailing   '] })),
    );
    t.equal(three.status, 202, 'three spaces in a row are fine');
  });

  t.test('html is required when inline_images are sent', async (t) => {
    await rejects(
      t,
      'images without html',
      handoff(email(['a@example.com'], { inline_images: [{ cid: 'logo', data: PNG_1x1 }] })),
      { path: '/messages/0/content/html' },
    );
    await rejects(
      t,
      'a repeated cid',
      handoff(
        email(['a@example.com'], {
          html: '<p/>',
          inline_images: [
            { cid: 'logo', data: PNG_1x1 },
            { cid: 'logo', data: PNG_1x1 },
          ],
        }),
      ),
      { path: '/messages/0/content/inline_images/1/cid' },
    );
    await rejects(
      t,
      'an image that is not an image type',
      handoff(
        email(['a@example.com'], {
          html: '<p/>',
          inline_images: [{ cid: 'x', media_type: 'text/html', data: PNG_1x1 }],
        }),
      ),
      { path: '/messages/0/content/inline_images/0/media_type' },
    );
  });

  t.test('fields that belong to another channel', async (t) => {
    await rejects(t, 'data on sms', handoff(sms(['+15551230001'], { data: { a: 'b' } })), {
      path: '/messages/0/content/data',
    });
    await rejects(t, 'subject on sms', handoff(sms(['+15551230001'], { subject: 'x' })), {
      path: '/messages/0/content/subject',
    });
    await rejects(t, 'html on push', handoff(push(['u1'], { html: '<p/>' })), {
      path: '/messages/0/content/html',
    });
    await rejects(
      t,
      'inline_images on sms',
      handoff(sms(['+15551230001'], { inline_images: [{ cid: 'a', data: PNG_1x1 }] })),
      { path: '/messages/0/content/inline_images' },
    );
    await rejects(
      t,
      'template_name on email',
      handoff(email(['a@example.com'], { template_name: 't' })),
      { path: '/messages/0/content/template_name' },
    );
    await rejects(t, 'body_params on sms', handoff(sms(['+15551230001'], { body_params: ['x'] })), {
      path: '/messages/0/content/body_params',
    });
    await rejects(
      t,
      'url_button_suffix on push',
      handoff(push(['u1'], { url_button_suffix: 'x' })),
      { path: '/messages/0/content/url_button_suffix' },
    );
    await rejects(
      t,
      'body on whatsapp',
      handoff(whatsapp(['+15551230001'], { body: 'free text' })),
      { path: '/messages/0/content/body' },
    );
    await rejects(
      t,
      'data on whatsapp',
      handoff(whatsapp(['+15551230001'], { data: { a: 'b' } })),
      { path: '/messages/0/content/data' },
    );
    await rejects(
      t,
      'push data values must be strings',
      handoff(push(['u1'], { data: { n: 1 } })),
      { path: '/messages/0/content/data/n' },
    );
  });

  t.test('unknown and missing fields', async (t) => {
    await rejects(
      t,
      'an unknown top-level field',
      { ...handoff(sms(['+15551230001'])), priority: 'high' },
      { path: '/priority' },
    );
    await rejects(
      t,
      'an unknown entry field',
      handoff({ ...sms(['+15551230001']), priority: 'high' }),
      { path: '/messages/0/priority' },
    );
    await rejects(t, 'an unknown content field', handoff(sms(['+15551230001'], { footer: 'x' })), {
      path: '/messages/0/content/footer',
    });
    await rejects(
      t,
      'tenant missing',
      { event_type: 'e', messages: [sms(['+15551230001'])] },
      { path: '/tenant' },
    );
    await rejects(
      t,
      'event_type missing',
      { tenant: 'acme', messages: [sms(['+15551230001'])] },
      { path: '/event_type' },
    );
    await rejects(
      t,
      'messages missing',
      { tenant: 'acme', event_type: 'e' },
      { path: '/messages' },
    );
    await rejects(t, 'messages empty', handoff(), { path: '/messages' });
    await rejects(t, 'recipients empty', handoff(sms([])), { path: '/messages/0/recipients' });
    await rejects(
      t,
      'an unknown channel',
      handoff(entry('fax', ['+15551230001'], { kind: 'rendered', body: 'x' })),
      { path: '/messages/0/channel' },
    );
    await rejects(t, 'a body that is not an object', [handoff(sms(['+15551230001']))], {});
    await rejects(
      t,
      'a recipient that is not a string',
      handoff(sms([15551230001 as unknown as string])),
      { path: '/messages/0/recipients/0' },
    );
  });

  t.test('bad phone numbers name the bad recipient', async (t) => {
    for (const [i, bad] of [
      'abc',
      '1234567',
      '+1234567890123456',
      '0015551230001',
      '+15551230001x',
      '+',
      '++15551230001',
    ].entries()) {
      await rejects(t, `sms "${bad}"`, handoff(sms(['+15551230001', bad])), {
        path: '/messages/0/recipients/1',
      });
      if (i === 0)
        await rejects(
          t,
          `whatsapp "${bad}"`,
          handoff(whatsapp(['+15551230001', '15551230002', bad])),
          { path: '/messages/0/recipients/2' },
        );
    }
    const r = await rejects(t, 'two bad numbers', handoff(sms(['abc', '+15551230001', 'def'])), {
      path: '/messages/0/recipients/0',
    });
    t.ok(
      r.body.errors.some((e: { path: string }) => e.path === '/messages/0/recipients/2'),
      'every bad recipient is listed',
    );
  });

  t.test('bad email addresses name the bad recipient', async (t) => {
    for (const bad of [
      'not-an-email',
      'a@b',
      'a b@example.com',
      '@example.com',
      'ann@',
      'ann@@example.com',
      'ann@exa mple.com',
      '+15551230001',
    ]) {
      await rejects(t, `email "${bad}"`, handoff(email(['ok@example.com', bad])), {
        path: '/messages/0/recipients/1',
      });
    }
    await rejects(t, 'a blank push user', handoff(push(['u1', '   '])), {
      path: '/messages/0/recipients/1',
    });
  });

  t.test('phone numbers are normalised to + and digits', async (t) => {
    for (const raw of ['15551230001', '+1 555-123-0001', '+1 (555) 123.0001', ' +15551230001 ']) {
      const r = await post(handoff(sms([raw])));
      t.equal(r.status, 202, JSON.stringify(raw));
      t.equal(
        r.body.deliveries[0].recipient,
        '+15551230001',
        `${JSON.stringify(raw)} becomes +15551230001`,
      );
    }
    const wa = await post(handoff(whatsapp(['4915112345678'])));
    t.equal(wa.body.deliveries[0].recipient, '+4915112345678', 'whatsapp numbers too');
    const shortest = await post(handoff(sms(['+12345678', '+123456789012345'])));
    t.same(
      shortest.body.deliveries.map((d: { recipient: string }) => d.recipient),
      ['+12345678', '+123456789012345'],
      '8 and 15 digits are the bounds',
    );
  });

  t.test('a recipient repeated within one entry gets one delivery', async (t) => {
    const r = await post(
      handoff(
        sms(['+15551230001', '15551230001', '+1 555-123-0001', '+15551230002']),
        email(['ann@example.com', 'ann@example.com']),
      ),
    );
    t.equal(r.status, 202);
    t.same(
      r.body.deliveries.map(
        (d: { channel: string; recipient: string }) => `${d.channel}:${d.recipient}`,
      ),
      ['sms:+15551230001', 'sms:+15551230002', 'email:ann@example.com'],
    );
    const stored = await svc.rt.db.query(
      'SELECT count(*)::int AS n FROM deliveries WHERE handoff_id = $1',
      [r.body.handoff_id],
    );
    t.equal(stored.rows[0].n, 3, 'three deliveries stored');
    const mixedCase = await post(
      handoff(email(['Ann@Example.COM', 'Ann@example.com', 'ann@example.com'])),
    );
    t.same(
      mixedCase.body.deliveries.map((d: { recipient: string }) => d.recipient),
      ['Ann@example.com', 'ann@example.com'],
      'email domains are compared without case; local parts with case',
    );
    const pushUsers = await post(handoff(push(['user-1', ' user-1 ', 'User-1'])));
    t.same(
      pushUsers.body.deliveries.map((d: { recipient: string }) => d.recipient),
      ['user-1', 'User-1'],
      'push user ids are trimmed and otherwise exact',
    );
    const sameNumberTwoChannels = await post(
      handoff(sms(['+15551230001']), whatsapp(['+15551230001'])),
    );
    t.equal(
      sameNumberTwoChannels.body.deliveries.length,
      2,
      'the same number on two channels is two deliveries',
    );
  });

  t.test('Idempotency-Key is required', async (t) => {
    await rejects(t, 'no Idempotency-Key', handoff(sms(['+15551230001'])), {
      code: 'ENS_ERR_IDEMPOTENCY_KEY_MISSING',
      withoutKey: true,
      detail: /Idempotency-Key/,
    });
    const before = await counts();
    const empty = await post(handoff(sms(['+15551230001'])), { 'idempotency-key': '' });
    t.equal(empty.status, 400, 'an empty Idempotency-Key');
    const long = await post(handoff(sms(['+15551230001'])), { 'idempotency-key': 'k'.repeat(256) });
    t.equal(long.status, 400, 'an Idempotency-Key over 255 characters');
    t.same(await counts(), before, 'nothing stored');
  });

  t.test('a tenant that is not provisioned', async (t) => {
    const r = await rejects(
      t,
      'unknown tenant',
      { ...handoff(sms(['+15551230001'])), tenant: 'globex' },
      { code: 'ENS_ERR_TENANT_NOT_PROVISIONED' },
    );
    t.match(r.body.detail, /"globex"/, 'the detail names the tenant');
  });

  t.test('a tenant that is not provisioned, sent together with a valid handoff', async (t) => {
    // Concurrent accepts share a transaction: the refused one must store nothing, the other
    // everything.
    const goodKey = uniqueKey('good');
    const badKey = uniqueKey('bad');
    const before = await counts();
    const [good, bad] = await Promise.all([
      post(smsHandoff('acme', ['+15551230001']), { 'idempotency-key': goodKey }),
      post({ ...handoff(sms(['+15551230002'])), tenant: 'globex' }, { 'idempotency-key': badKey }),
    ]);
    t.equal(good.status, 202, 'the valid handoff is accepted');
    t.equal(good.headers.get('idempotent-replayed'), null);
    t.equal(bad.status, 400, 'the other is refused');
    t.equal(bad.body.code, 'ENS_ERR_TENANT_NOT_PROVISIONED');
    t.match(bad.body.detail, /"globex"/);
    t.same(
      await counts(),
      { handoffs: before.handoffs + 1, deliveries: before.deliveries + 1, keys: before.keys + 1 },
      'only the valid one is stored',
    );
    const stored = await svc.rt.db.query(
      'SELECT count(*)::int AS n FROM deliveries WHERE handoff_id = $1',
      [good.body.handoff_id],
    );
    t.equal(stored.rows[0].n, 1, 'with its delivery');
    await keyStillFree(t, badKey);
    const replay = await post(smsHandoff('acme', ['+15551230001']), { 'idempotency-key': goodKey });
    t.equal(replay.text, good.text, 'the valid one replays');
  });

  t.test('inline image data', async (t) => {
    const img = (data: string) =>
      handoff(
        email(['a@example.com'], {
          html: '<img src="cid:x">',
          inline_images: [{ cid: 'x', data }],
        }),
      );
    await rejects(t, 'bad base64', img('not base64!'), {
      path: '/messages/0/content/inline_images/0/data',
      detail: /base64/,
    });
    await rejects(t, 'base64 with a bad length', img('abcde'), {
      path: '/messages/0/content/inline_images/0/data',
    });
    await rejects(
      t,
      'base64url alphabet',
      img(Buffer.from([0xfb, 0xff, 0xfe]).toString('base64url')),
      { path: '/messages/0/content/inline_images/0/data' },
    );
    const twoBad = handoff(
      email(['a@example.com'], {
        html: '<p/>',
        inline_images: [
          { cid: 'a', data: '!!' },
          { cid: 'b', data: PNG_1x1 },
          { cid: 'c', data: '??' },
        ],
      }),
    );
    const r = await rejects(t, 'two bad images of three', twoBad, {
      path: '/messages/0/content/inline_images/0/data',
    });
    t.ok(
      r.body.errors.some(
        (e: { path: string }) => e.path === '/messages/0/content/inline_images/2/data',
      ),
      'every bad image is listed',
    );
    const wrapped = PNG_1x1.replace(/(.{20})/g, '$1\r\n');
    t.equal((await post(img(wrapped))).status, 202, 'MIME line breaks inside base64 are accepted');

    const big = Buffer.alloc(MAX_IMAGE_BYTES + 1, 7).toString('base64');
    await rejects(t, 'an image over ENS_MAX_IMAGE_BYTES', img(big), {
      status: 413,
      code: 'ENS_ERR_PAYLOAD_TOO_LARGE',
      detail: /ENS_MAX_IMAGE_BYTES/,
    });
    const atLimit = Buffer.alloc(MAX_IMAGE_BYTES, 7).toString('base64');
    t.equal(
      (await post(img(atLimit))).status,
      202,
      'an image of exactly ENS_MAX_IMAGE_BYTES is accepted',
    );
  });

  t.test('a body over ENS_MAX_BODY_BYTES is 413', async (t) => {
    const r = await rejects(
      t,
      'a large body',
      handoff(sms(['+15551230001'], { body: 'x'.repeat(MAX_BODY_BYTES) })),
      { status: 413, code: 'ENS_ERR_PAYLOAD_TOO_LARGE' },
    );
    t.match(r.body.detail, String(MAX_BODY_BYTES));
  });

  t.test('more recipients than ENS_MAX_RECIPIENTS', async (t) => {
    const numbers = (n: number) =>
      Array.from({ length: n }, (_, i) => `+1555123${String(i).padStart(4, '0')}`);
    await rejects(t, 'too many recipients', handoff(sms(numbers(MAX_RECIPIENTS + 1))), {
      path: '/messages/0/recipients',
      detail: new RegExp(String(MAX_RECIPIENTS)),
    });
    const ok = await post(handoff(sms(numbers(MAX_RECIPIENTS)), email(['a@example.com'])));
    t.equal(ok.status, 202, 'exactly the limit is fine; the limit is per entry');
    t.equal(ok.body.deliveries.length, MAX_RECIPIENTS + 1);
  });

  t.test('callback_url must be a public http(s) URL', async (t) => {
    for (const url of [
      'ftp://example.com/cb',
      'javascript:alert(1)',
      'not a url',
      'file:///etc/passwd',
      'https://user:pw@example.com/cb',
    ]) {
      await rejects(
        t,
        url,
        { ...handoff(sms(['+15551230001'])), callback_url: url },
        { path: '/callback_url' },
      );
    }
    for (const url of [
      'http://127.0.0.1/cb',
      'http://localhost:8080/cb',
      'http://10.1.2.3/cb',
      'http://192.168.0.1/cb',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/cb',
      'http://0x7f.1/cb',
    ]) {
      await rejects(
        t,
        `${url} (private, ENS_ALLOW_PRIVATE_CALLBACKS=false)`,
        { ...handoff(sms(['+15551230001'])), callback_url: url },
        { path: '/callback_url' },
      );
    }
    const ok = await post({
      ...handoff(sms(['+15551230001'])),
      callback_url: 'https://example.com/hooks/ens',
    });
    t.equal(ok.status, 202, 'a public https URL is accepted');
    const { rows } = await svc.rt.db.query('SELECT callback_url FROM handoffs WHERE id = $1', [
      ok.body.handoff_id,
    ]);
    t.equal(rows[0].callback_url, 'https://example.com/hooks/ens');
  });

  t.test('a body that is not JSON', async (t) => {
    await rejects(t, 'truncated JSON', undefined, {
      raw: '{"tenant": "acme", ',
      code: 'ENS_ERR_BAD_REQUEST',
    });
    await rejects(t, 'empty body', undefined, { raw: '', code: 'ENS_ERR_BAD_REQUEST' });
    await rejects(t, 'a JSON string', undefined, { raw: '"hello"' });
    await rejects(t, 'null', undefined, { raw: 'null' });
    const json = JSON.stringify(handoff(sms(['+15551230001'])));
    await rejects(t, 'JSON sent as application/xml', undefined, {
      raw: json,
      contentType: 'application/xml',
      status: 415,
      code: 'ENS_ERR_UNSUPPORTED_MEDIA_TYPE',
      detail: /application\/json/,
    });
    await rejects(t, 'JSON sent as text/plain', undefined, {
      raw: json,
      contentType: 'text/plain',
      status: 415,
      code: 'ENS_ERR_UNSUPPORTED_MEDIA_TYPE',
    });
    await rejects(t, 'a form-encoded body', undefined, {
      raw: 'tenant=acme&event_type=e',
      contentType: 'application/x-www-form-urlencoded',
      status: 415,
      code: 'ENS_ERR_UNSUPPORTED_MEDIA_TYPE',
    });
  });
});
