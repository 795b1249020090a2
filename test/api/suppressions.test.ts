import t from 'tap';
import {
  smsHandoff,
  startTestService,
  waitFor,
  type TestClient,
  type TestService,
} from '../harness/service.ts';

/**
 * /v2/tenants/{tenant}/suppressions: a tenant's suppression list read and edited by its client,
 * over a running service (real PostgreSQL and NATS). Addresses travel URL-encoded in the path and
 * reach their normalised entry; bad input is a 400 with a detail that changes nothing; another
 * client's tenant is a 404; an entry made here stops the send path at once.
 */

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const svc: TestService = await startTestService(t);
const owner = await svc.createClient();
const stranger = await svc.createClient();
await svc.tenant(owner, 'acme');
await svc.tenant(stranger, 'stranger-tenant');

const base = '/v2/tenants/acme/suppressions';

/**
 * Every row of the client's list, straight from the table: what a refused request must not change.
 */
async function rows(clientId = owner.clientId): Promise<string> {
  const r = await svc.rt.db.query(
    `SELECT tenant, channel, address, scope, reason, source, detail, expires_at, updated_at FROM suppressions WHERE client_id = $1 ORDER BY 1, 2, 3, 4`,
    [clientId],
  );
  return JSON.stringify(r.rows);
}

t.test(
  'PUT adds an entry (201) with source api and the client as created_by; again replaces it (200)',
  async (t) => {
    const r = await owner.call('PUT', `${base}/sms/%2B15551230001`);
    t.equal(r.status, 201, r.text);
    t.same(Object.keys(r.body).sort(), [
      'address',
      'channel',
      'created_at',
      'created_by',
      'delivery_id',
      'detail',
      'expires_at',
      'provider',
      'reason',
      'scope',
      'source',
      'tenant',
      'updated_at',
    ]);
    t.match(r.body, {
      tenant: 'acme',
      channel: 'sms',
      address: '+15551230001',
      scope: '*',
      reason: 'manual',
      source: 'api',
      created_by: owner.clientId,
      detail: null,
      provider: null,
      delivery_id: null,
      expires_at: null,
    });
    t.match(r.body.created_at, ISO);

    const again = await owner.call('PUT', `${base}/sms/%2B15551230001`, {
      body: { reason: 'opt_out', detail: 'asked by phone on 2026-11-20' },
    });
    t.equal(again.status, 200, 'the same key: replaced');
    t.equal(again.body.reason, 'opt_out');
    t.equal(again.body.detail, 'asked by phone on 2026-11-20');
    t.equal(again.body.created_at, r.body.created_at, 'created_at kept');
    t.ok(Date.parse(again.body.updated_at) >= Date.parse(r.body.updated_at));
    const n = await svc.rt.db.query(
      `SELECT count(*)::int AS n FROM suppressions WHERE client_id = $1 AND address = '+15551230001'`,
      [owner.clientId],
    );
    t.equal(n.rows[0].n, 1, 'one row');
  },
);

t.test(
  'addresses in the path: +, %2B, digits alone, upper case and IDNA all reach the one ' +
    'normalised entry',
  async (t) => {
    const plain = await owner.call('GET', `${base}/sms/+15551230001`);
    t.equal(plain.status, 200, `a raw + in the path: ${plain.text}`);
    t.same(
      plain.body.results.map((e: any) => e.address),
      ['+15551230001'],
    );
    for (const form of [
      '%2B15551230001',
      '15551230001',
      '%2B1%20555%20123%200001',
      '+1-555-123-0001',
    ]) {
      const r = await owner.call('GET', `${base}/sms/${form}`);
      t.equal(r.status, 200, form);
      t.same(
        r.body?.results?.map((e: any) => e.address),
        ['+15551230001'],
        `${form} is +15551230001`,
      );
    }

    const put = await owner.call(
      'PUT',
      `${base}/email/${encodeURIComponent('Ann.Smith@Bücher.Example')}`,
      { body: { reason: 'complaint' } },
    );
    t.equal(put.status, 201, put.text);
    t.equal(
      put.body.address,
      'ann.smith@xn--bcher-kva.example',
      'case-folded, the domain in IDNA ASCII form',
    );
    for (const form of [
      'ann.smith%40xn--bcher-kva.example',
      encodeURIComponent('ANN.SMITH@BÜCHER.EXAMPLE'),
      'Ann.Smith@XN--BCHER-KVA.example',
    ]) {
      const r = await owner.call('GET', `${base}/email/${form}`);
      t.equal(r.status, 200, form);
      t.same(
        r.body?.results?.map((e: any) => [e.address, e.reason]),
        [['ann.smith@xn--bcher-kva.example', 'complaint']],
        form,
      );
    }
    const listed = await owner.call(
      'GET',
      `${base}?channel=email&address=${encodeURIComponent('ANN.SMITH@bücher.example')}`,
    );
    t.equal(listed.status, 200);
    t.same(
      listed.body.results.map((e: any) => e.address),
      ['ann.smith@xn--bcher-kva.example'],
      'the list filter normalises too',
    );

    const del = await owner.call(
      'DELETE',
      `${base}/email/${encodeURIComponent('ANN.smith@BÜCHER.example')}`,
    );
    t.equal(del.status, 204, 'DELETE by another form of the address');
    t.equal(del.text, '');
    t.equal(
      (await owner.call('GET', `${base}/email/ann.smith%40xn--bcher-kva.example`)).status,
      404,
      'gone',
    );
  },
);

t.test(
  'GET one address returns every scope; DELETE ?scope= removes one, DELETE alone the rest; 404 ' +
    'when nothing is there',
  async (t) => {
    const addr = 'reader%40example.com';
    t.equal(
      (
        await owner.call('PUT', `${base}/email/${addr}`, {
          body: { scope: 'newsletter.weekly', reason: 'opt_out' },
        })
      ).status,
      201,
    );
    t.equal(
      (
        await owner.call('PUT', `${base}/email/${addr}`, {
          body: { scope: 'promo.sale', reason: 'opt_out' },
        })
      ).status,
      201,
    );
    t.equal(
      (
        await owner.call('PUT', `${base}/email/${addr}`, {
          body: { reason: 'hard_bounce', detail: '550 5.1.1 no such user' },
        })
      ).status,
      201,
    );
    const got = await owner.call('GET', `${base}/email/${addr}`);
    t.equal(got.status, 200);
    t.same(
      got.body.results.map((e: any) => [e.scope, e.reason]),
      [
        ['*', 'hard_bounce'],
        ['newsletter.weekly', 'opt_out'],
        ['promo.sale', 'opt_out'],
      ],
    );

    const one = await owner.call('DELETE', `${base}/email/${addr}?scope=newsletter.weekly`);
    t.equal(one.status, 204);
    t.same(
      (await owner.call('GET', `${base}/email/${addr}`)).body.results.map((e: any) => e.scope),
      ['*', 'promo.sale'],
      'only that scope went',
    );
    const again = await owner.call('DELETE', `${base}/email/${addr}?scope=newsletter.weekly`);
    t.equal(again.status, 404);
    t.equal(again.body.code, 'ENS_ERR_SUPPRESSION_NOT_FOUND');
    t.match(again.body.detail, /reader@example\.com/);

    t.equal(
      (await owner.call('DELETE', `${base}/email/${addr}`)).status,
      204,
      'every remaining scope',
    );
    const none = await owner.call('GET', `${base}/email/${addr}`);
    t.equal(none.status, 404);
    t.equal(none.body.code, 'ENS_ERR_SUPPRESSION_NOT_FOUND');
    t.equal((await owner.call('DELETE', `${base}/email/${addr}`)).status, 404);
  },
);

t.test(
  'PUT with expires_at and a soft bounce; a soft bounce does not replace a standing hard ' +
    'bounce (409, unchanged)',
  async (t) => {
    const until = new Date(Date.now() + 3_600_000).toISOString();
    const timed = await owner.call('PUT', `${base}/sms/15559990001`, {
      body: { reason: 'manual', expires_at: until },
    });
    t.equal(timed.status, 201);
    t.equal(Date.parse(timed.body.expires_at), Date.parse(until));
    const soft = await owner.call('PUT', `${base}/sms/15559990002`, {
      body: { reason: 'soft_bounce' },
    });
    t.equal(soft.status, 201);
    const held = Date.parse(soft.body.expires_at) - Date.now();
    t.ok(
      held > 23 * 3_600_000 && held <= 24 * 3_600_000,
      'a soft bounce without expires_at holds for ENS_SOFT_BOUNCE_HOLD (24h)',
    );

    t.equal(
      (await owner.call('PUT', `${base}/sms/15559990003`, { body: { reason: 'hard_bounce' } }))
        .status,
      201,
    );
    const before = await rows();
    const kept = await owner.call('PUT', `${base}/sms/15559990003`, {
      body: { reason: 'soft_bounce' },
    });
    t.equal(kept.status, 409);
    t.equal(kept.body.code, 'ENS_ERR_SUPPRESSION_KEPT');
    t.match(kept.body.detail, /hard_bounce/);
    t.equal(await rows(), before, 'nothing changed');
  },
);

t.test('bad input: a 400 with a detail, and nothing changed', async (t) => {
  const before = await rows();
  const cases: [string, string, unknown, RegExp][] = [
    ['PUT', `${base}/sms/not-a-phone`, undefined, /not a sms address/],
    ['PUT', `${base}/sms/%2B0123`, undefined, /not a sms address/],
    ['PUT', `${base}/whatsapp/ann%40example.com`, undefined, /not a whatsapp address/],
    ['PUT', `${base}/email/no-at-sign`, undefined, /not a email address/],
    ['PUT', `${base}/email/ann%40localhost`, undefined, /not a email address/],
    ['PUT', `${base}/email/${'a'.repeat(250)}%40example.com`, undefined, /address/],
    ['PUT', `${base}/fax/%2B15551230009`, undefined, /channel/],
    ['PUT', `${base}/sms/%2B15551230009`, { scope: 'two words' }, /scope/],
    ['PUT', `${base}/sms/%2B15551230009`, { scope: '' }, /scope/],
    ['PUT', `${base}/sms/%2B15551230009`, { reason: 'bored' }, /reason/],
    ['PUT', `${base}/sms/%2B15551230009`, { source: 'provider' }, /source/],
    ['PUT', `${base}/sms/%2B15551230009`, { reason: 'manual', colour: 'red' }, /colour/],
    ['PUT', `${base}/sms/%2B15551230009`, { detail: 'x'.repeat(1001) }, /detail/],
    ['PUT', `${base}/sms/%2B15551230009`, { expires_at: 'tomorrow' }, /expires_at/],
    [
      'PUT',
      `${base}/sms/%2B15551230009`,
      { expires_at: '2020-01-01T00:00:00Z' },
      /expires_at.*future/,
    ],
    ['PUT', `${base}/sms/%2B15551230009`, [], /body/],
    ['DELETE', `${base}/sms/%2B15551230001?scope=two%20words`, undefined, /scope/],
    ['DELETE', `${base}/sms/%2B15551230001?colour=red`, undefined, /colour/],
    ['DELETE', `${base}/sms/nonsense`, undefined, /not a sms address/],
    ['GET', `${base}/sms/nonsense`, undefined, /not a sms address/],
    ['GET', `${base}?limit=1001`, undefined, /limit/],
    ['GET', `${base}?limit=0`, undefined, /limit/],
    ['GET', `${base}?reason=bored`, undefined, /reason/],
    ['GET', `${base}?channel=fax`, undefined, /channel/],
    ['GET', `${base}?address=%2B15551230001`, undefined, /channel/],
    ['GET', `${base}?channel=sms&address=nonsense`, undefined, /not a sms address/],
    ['GET', `${base}?cursor=not-a-cursor`, undefined, /cursor/],
    ['GET', `${base}?colour=red`, undefined, /colour/],
    ['GET', '/v2/tenants/a%20b/suppressions', undefined, /tenant/],
  ];
  for (const [method, url, body, detail] of cases) {
    const r = await owner.call(method, url, body === undefined ? {} : { body });
    t.equal(
      r.status,
      400,
      `${method} ${url} ${JSON.stringify(body) ?? ''}: ${r.text.slice(0, 200)}`,
    );
    t.equal(r.body?.code, 'ENS_ERR_VALIDATION', `${method} ${url}`);
    t.match(r.body?.detail, detail, `${method} ${url}: the detail names the problem`);
  }
  const text = await svc.request('PUT', `${base}/sms/%2B15551230009`, {
    raw: 'manual',
    headers: { 'content-type': 'text/plain', authorization: `Bearer ${await owner.token()}` },
  });
  t.equal(text.status, 415, 'a body that is not JSON');
  t.equal(text.body?.code, 'ENS_ERR_UNSUPPORTED_MEDIA_TYPE');
  t.equal(await rows(), before, 'no refused request changed the list');
});

t.test("another client's tenant, or no token: nothing is read or changed", async (t) => {
  const before = await rows();
  const theirs = '/v2/tenants/stranger-tenant/suppressions';
  t.equal(
    (await stranger.call('PUT', `${theirs}/sms/%2B15551230001`)).status,
    201,
    'the stranger may suppress in its own tenant',
  );
  const strangerBefore = await rows(stranger.clientId);
  for (const [method, url] of [
    ['GET', base],
    ['GET', `${base}/sms/%2B15551230001`],
    ['PUT', `${base}/sms/%2B15551230077`],
    ['DELETE', `${base}/sms/%2B15551230001`],
  ] as const) {
    const r = await stranger.call(method, url);
    t.equal(r.status, 404, `${method} ${url} by another client`);
    t.equal(r.body.code, 'ENS_ERR_TENANT_NOT_FOUND');
    const anon = await svc.request(method, url);
    t.equal(anon.status, 401, `${method} ${url} without a token`);
  }
  for (const [method, url] of [
    ['GET', theirs],
    ['GET', `${theirs}/sms/%2B15551230001`],
    ['DELETE', `${theirs}/sms/%2B15551230001`],
  ] as const) {
    const r = await owner.call(method, url);
    t.equal(r.status, 404, `the owner cannot reach the stranger's tenant: ${method} ${url}`);
    t.equal(r.body.code, 'ENS_ERR_TENANT_NOT_FOUND');
  }
  t.equal((await owner.call('GET', '/v2/tenants/nowhere/suppressions')).status, 404);
  t.equal(await rows(), before, "the owner's list is unchanged");
  t.equal(await rows(stranger.clientId), strangerBefore, "the stranger's list is unchanged");
});

t.test(
  'paging 2,500 entries with limit 1000 returns each once, in key order; filters page too',
  async (t) => {
    const c = await svc.createClient();
    await svc.tenant(c, 'big');
    const inputs = Array.from({ length: 2500 }, (_, i) => ({
      tenant: 'big',
      channel: (i % 5 === 0 ? 'email' : 'sms') as 'email' | 'sms',
      address:
        i % 5 === 0 ? `user${i}@example.com` : `+1555${String(2_000_000 + i).padStart(7, '0')}`,
      reason: (i % 2 === 0 ? 'hard_bounce' : 'manual') as 'hard_bounce' | 'manual',
      source: 'import' as const,
    }));
    const made = await svc.rt.suppressions.upsert(c.clientId, inputs);
    t.equal(made.created, 2500);

    const walk = async (query: string) => {
      const seen: string[] = [];
      let pages = 0;
      let url = `/v2/tenants/big/suppressions?limit=1000${query}`;
      for (;;) {
        const r = await c.call('GET', url);
        if (r.status !== 200) t.fail(`${url}: ${r.status} ${r.text.slice(0, 200)}`);
        t.ok(r.body.results.length <= 1000, `a page of ${r.body.results.length}`);
        seen.push(
          ...r.body.results.map((e: any) => `${e.channel} ${e.address} ${e.scope} ${e.reason}`),
        );
        pages++;
        if (r.body.next_cursor === null) return { seen, pages };
        url = `/v2/tenants/big/suppressions?limit=1000&cursor=${encodeURIComponent(r.body.next_cursor)}${query}`;
      }
    };
    const all = await walk('');
    t.equal(all.seen.length, 2500, 'every entry');
    t.equal(new Set(all.seen).size, 2500, 'each once');
    t.ok(all.pages === 3 || all.pages === 4, `${all.pages} pages`);
    const keyOrder = [...all.seen].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    t.same(all.seen, keyOrder, 'in (channel, address, scope) order');

    const hard = await walk('&reason=hard_bounce');
    t.equal(hard.seen.length, 1250);
    t.ok(hard.seen.every((s) => s.endsWith(' hard_bounce')));
    const email = await walk('&channel=email');
    t.equal(email.seen.length, 500);
    t.ok(email.seen.every((s) => s.startsWith('email ')));
    const emailManual = await walk('&channel=email&reason=manual');
    t.equal(emailManual.seen.length, 250, 'the odd ones of every fifth');
    t.ok(emailManual.seen.every((s) => s.startsWith('email ') && s.endsWith(' manual')));
    const smsManual = await walk('&channel=sms&reason=manual');
    t.equal(smsManual.seen.length, 1000);

    const small = await c.call('GET', '/v2/tenants/big/suppressions');
    t.equal(small.body.results.length, 100, 'limit defaults to 100');
  },
);

t.test(
  'an entry PUT here stops the next send to the address without a provider call; after DELETE ' +
    'it goes',
  async (t) => {
    const c: TestClient = await svc.createClient();
    await svc.tenant(c, 'shop');
    t.equal(
      (
        await c.call('PUT', '/v2/tenants/shop/suppressions/sms/%2B15556660001', {
          body: { detail: 'asked us to stop' },
        })
      ).status,
      201,
    );
    const sent = await svc.send(c, smsHandoff('shop', ['+1 555 666 0001']));
    t.equal(sent.status, 202, 'the accept is unchanged');
    const id = sent.body.deliveries[0].delivery_id;
    const row = await waitFor(
      async () => (await svc.feed(c)).find((r) => r.delivery_id === id && r.status !== 'pending'),
      15_000,
      'the delivery to end',
    );
    t.equal(row.status, 'failed');
    t.match(
      row.last_error,
      /^suppressed: \+15556660001 is on the suppression list \(manual, api\) since .*: asked us to stop$/,
    );
    const attempts = await svc.rt.db.query(
      'SELECT count(*)::int AS n FROM attempts WHERE delivery_id = $1',
      [id],
    );
    t.equal(attempts.rows[0].n, 0, 'no provider call');

    t.equal((await c.call('DELETE', '/v2/tenants/shop/suppressions/sms/15556660001')).status, 204);
    const again = await svc.send(c, smsHandoff('shop', ['+15556660001']));
    const id2 = again.body.deliveries[0].delivery_id;
    const row2 = await waitFor(
      async () => (await svc.feed(c)).find((r) => r.delivery_id === id2 && r.status !== 'pending'),
      15_000,
      'the second delivery to end',
    );
    t.equal(row2.status, 'sent', 'lifted: sent');
  },
);
