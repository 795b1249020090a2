import t from 'tap';
import { startReceiver } from '../../../test/harness/receiver.ts';
import { startTestService, uniqueKey, waitFor } from '../../../test/harness/service.ts';
import {
  CallbackVerificationError,
  createEnsClient,
  TokenSource,
  verifyCallback,
  type EnsClient,
  type Suppression,
} from '../src/index.ts';

/**
 * @ens/client against a live ENS (real PostgreSQL and NATS): tokens, a send and its pull, a
 * callback.
 */
const TTL = 2;

t.test('@ens/client', async (t) => {
  const svc = await startTestService(t, { env: { ENS_TOKEN_TTL: String(TTL) } });
  const issued = await svc.createClient({ callbackSecret: true });
  const credentials = {
    baseUrl: svc.baseUrl,
    clientId: issued.clientId,
    clientSecret: issued.clientSecret,
  };
  const ens = createEnsClient(credentials);
  const created = await ens.api.POST('/v2/tenants', { body: { tenant: 'acme', name: 'Acme Ltd' } });
  t.equal(created.response.status, 201, JSON.stringify(created.error));

  t.test('a token is minted when first needed and refreshed before it expires', async (t) => {
    const c = createEnsClient(credentials);
    const first = await c.api.GET('/v2/tenants');
    t.equal(first.response.status, 200);
    t.same(
      first.data?.results.map((r) => r.tenant),
      ['acme'],
    );
    await c.api.GET('/v2/tenants/{tenant}', { params: { path: { tenant: 'acme' } } });
    t.equal(c.tokens.minted, 1, 'one token for both calls');
    // Refreshed at half its 2 s lifetime: after 1.2 s the next call mints another, never a 401.
    await new Promise((r) => setTimeout(r, 1200));
    const later = await c.api.GET('/v2/tenants');
    t.equal(later.response.status, 200);
    t.equal(c.tokens.minted, 2, 'a fresh token before the old one expired');
  });

  t.test('a token ENS refuses is replaced once, and the request sent again', async (t) => {
    class Forged extends TokenSource {
      served = 0;
      override async token(): Promise<string> {
        return this.served++ === 0 ? 'forged.token.value' : super.token();
      }
    }
    const tokens = new Forged(credentials);
    const c = createEnsClient({ ...credentials, tokens });
    const r = await c.api.PATCH('/v2/tenants/{tenant}', {
      params: { path: { tenant: 'acme' } },
      body: { name: 'Acme Limited' },
    });
    t.equal(r.response.status, 200, 'the retry (with its body) succeeded');
    t.equal(r.data?.name, 'Acme Limited');
    t.equal(tokens.served, 2, 'the forged token, then a real one');
  });

  t.test('wrong credentials are a TokenError with the RFC 6749 code', async (t) => {
    const c = createEnsClient({ ...credentials, clientSecret: 'wrong' });
    await t.rejects(c.api.GET('/v2/tenants'), {
      name: 'TokenError',
      status: 401,
      code: 'invalid_client',
    });
  });

  t.test('send, then pull the record, then verify the real callback', async (t) => {
    const receiver = await startReceiver(t);
    const reference = uniqueKey('client-order');
    const sent = await ens.send(
      {
        tenant: 'acme',
        event_type: 'order.shipped',
        reference,
        callback_url: receiver.url,
        messages: [
          {
            channel: 'sms',
            recipients: ['+15551230001'],
            content: { kind: 'rendered', body: 'Shipped.' },
          },
        ],
      },
      `${reference}-shipped`,
    );
    t.equal(sent.response.status, 202, JSON.stringify(sent.error));
    const deliveryId = sent.data!.deliveries[0]!.delivery_id;

    const row = await waitFor(
      async () => {
        const { data } = await ens.api.GET('/v2/deliveries', { params: { query: { reference } } });
        return data?.results.find((d) => d.delivery_id === deliveryId && d.status === 'sent');
      },
      15_000,
      'the delivery to be sent',
    );
    t.equal(row.recipient, '+15551230001');

    const post = await waitFor(async () => receiver.posts[0], 15_000, 'the callback');
    const payload = verifyCallback(post.raw, post.headers, issued.callbackSecret!);
    t.equal(payload.delivery_id, deliveryId);
    t.equal(payload.status, 'sent');
    t.throws(
      () =>
        verifyCallback(
          Buffer.concat([post.raw, Buffer.from(' ')]),
          post.headers,
          issued.callbackSecret!,
        ),
      CallbackVerificationError,
      'altered bytes are refused',
    );
    t.throws(
      () =>
        verifyCallback(
          post.raw,
          { ...post.headers, 'x-ens-signature': '0'.repeat(64) },
          issued.callbackSecret!,
        ),
      CallbackVerificationError,
      'a wrong X-ENS-Signature is refused',
    );
    t.throws(
      () =>
        verifyCallback(
          post.raw,
          { ...post.headers, 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 3600) },
          issued.callbackSecret!,
        ),
      CallbackVerificationError,
      'a stale timestamp is refused',
    );
  });

  t.test(
    'suppressions: add, read, list and delete through the typed client; the path carries + and ' +
      '@ encoded',
    async (t) => {
      const at = (channel: 'sms' | 'email', address: string) => ({
        params: { path: { tenant: 'acme', channel, address } },
      });
      const added = await ens.api.PUT('/v2/tenants/{tenant}/suppressions/{channel}/{address}', {
        ...at('sms', '+15551239999'),
        body: { reason: 'opt_out', detail: 'STOP by phone' },
      });
      t.equal(added.response.status, 201, JSON.stringify(added.error));
      const entry: Suppression | undefined = added.data;
      t.match(entry, {
        address: '+15551239999',
        reason: 'opt_out',
        scope: '*',
        source: 'api',
        created_by: issued.clientId,
        detail: 'STOP by phone',
      });
      const mail = await ens.api.PUT('/v2/tenants/{tenant}/suppressions/{channel}/{address}', {
        ...at('email', 'Ann+news@Example.com'),
        body: { scope: 'newsletter.weekly' },
      });
      t.equal(mail.response.status, 201, JSON.stringify(mail.error));
      t.equal(
        mail.data?.address,
        'ann+news@example.com',
        'the + of the local part survived the path',
      );

      const one = await ens.api.GET(
        '/v2/tenants/{tenant}/suppressions/{channel}/{address}',
        at('email', 'ann+news@example.com'),
      );
      t.same(
        one.data?.results.map((e) => [e.scope, e.reason]),
        [['newsletter.weekly', 'manual']],
      );

      const listed: Suppression[] = [];
      let cursor: string | undefined;
      do {
        const page = await ens.api.GET('/v2/tenants/{tenant}/suppressions', {
          params: { path: { tenant: 'acme' }, query: { limit: 1, ...(cursor ? { cursor } : {}) } },
        });
        t.equal(page.response.status, 200, JSON.stringify(page.error));
        listed.push(...(page.data?.results ?? []));
        cursor = page.data?.next_cursor ?? undefined;
      } while (cursor);
      t.same(
        listed.map((e) => e.address),
        ['ann+news@example.com', '+15551239999'],
        'both, page by page (email sorts before sms)',
      );

      const removed = await ens.api.DELETE(
        '/v2/tenants/{tenant}/suppressions/{channel}/{address}',
        at('sms', '+15551239999'),
      );
      t.equal(removed.response.status, 204);
      const gone = await ens.api.GET(
        '/v2/tenants/{tenant}/suppressions/{channel}/{address}',
        at('sms', '+15551239999'),
      );
      t.equal(gone.response.status, 404);
      t.equal(gone.error?.code, 'ENS_ERR_SUPPRESSION_NOT_FOUND');
      const bad = await ens.api.PUT('/v2/tenants/{tenant}/suppressions/{channel}/{address}', {
        ...at('sms', 'not-a-phone'),
        body: {},
      });
      t.equal(bad.response.status, 400);
      t.match(bad.error?.detail, /not a sms address/);
    },
  );
});

/** Compiles only while the Idempotency-Key stays required by the types (`npm run typecheck`). */
export function idempotencyKeyIsRequired(ens: EnsClient): void {
  // @ts-expect-error the generated types require params.header['idempotency-key']
  void ens.api.POST('/v2/messages', { body: { tenant: 'acme', event_type: 'x', messages: [] } });
}
