import t from 'tap';
import { startTestService, smsHandoff } from '../harness/service.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

t.test('/v2/tenants', async (t) => {
  const svc = await startTestService(t);
  const owner = await svc.createClient();
  const stranger = await svc.createClient();

  const count = async (id: string) =>
    (await svc.rt.db.query('SELECT count(*)::int AS n FROM tenants WHERE id = $1', [id])).rows[0]
      .n as number;

  t.test(
    'create is 201 with the tenant; creating it again is 200 with the same tenant',
    async (t) => {
      const first = await owner.call('POST', '/v2/tenants', {
        body: { tenant: 'acme', name: 'Acme Ltd', settings: { sender_id: 'ACME' } },
      });
      t.equal(first.status, 201);
      t.same(Object.keys(first.body).sort(), [
        'created_at',
        'name',
        'settings',
        'tenant',
        'updated_at',
      ]);
      t.equal(first.body.tenant, 'acme');
      t.equal(first.body.name, 'Acme Ltd');
      t.same(first.body.settings, { sender_id: 'ACME' });
      t.match(first.body.created_at, ISO);
      t.match(first.body.updated_at, ISO);

      const again = await owner.call('POST', '/v2/tenants', {
        body: { tenant: 'acme', name: 'Acme Ltd', settings: { sender_id: 'ACME' } },
      });
      t.equal(again.status, 200);
      t.same(again.body, first.body, 'the same tenant');

      const different = await owner.call('POST', '/v2/tenants', {
        body: { tenant: 'acme', name: 'Another name' },
      });
      t.equal(
        different.status,
        200,
        'creating is not updating: an existing tenant is returned unchanged',
      );
      t.same(different.body, first.body);
      t.equal(await count('acme'), 1, 'one row');
    },
  );

  t.test('a tenant without name or settings gets null and {}', async (t) => {
    const r = await owner.call('POST', '/v2/tenants', { body: { tenant: 'bare' } });
    t.equal(r.status, 201);
    t.equal(r.body.name, null);
    t.same(r.body.settings, {});
  });

  t.test('GET one tenant', async (t) => {
    await svc.tenant(owner, 'get-me');
    const r = await owner.call('GET', '/v2/tenants/get-me');
    t.equal(r.status, 200);
    t.equal(r.body.tenant, 'get-me');
    const missing = await owner.call('GET', '/v2/tenants/no-such-tenant');
    t.equal(missing.status, 404);
    t.equal(missing.body.code, 'ENS_ERR_TENANT_NOT_FOUND');
    t.match(missing.body.detail, /no-such-tenant/);
  });

  t.test('GET the list, in pages of `limit`, continuing `after` the last one', async (t) => {
    const lister = await svc.createClient();
    const ids = ['t-05', 't-01', 't-04', 't-02', 't-03'];
    for (const id of ids) await svc.tenant(lister, id);

    const all = await lister.call('GET', '/v2/tenants');
    t.equal(all.status, 200);
    t.same(
      all.body.results.map((r: { tenant: string }) => r.tenant),
      [...ids].sort(),
      'ordered by id',
    );
    t.equal(all.body.next_after, null, 'no more pages');

    const seen: string[] = [];
    let url = '/v2/tenants?limit=2';
    let pages = 0;
    for (;;) {
      const page = await lister.call('GET', url);
      t.equal(page.status, 200);
      t.ok(page.body.results.length <= 2);
      seen.push(...page.body.results.map((r: { tenant: string }) => r.tenant));
      pages++;
      if (page.body.next_after === null) break;
      url = `/v2/tenants?limit=2&after=${encodeURIComponent(page.body.next_after)}`;
    }
    t.same(seen, [...ids].sort(), 'every tenant exactly once');
    t.ok(pages >= 3, `${pages} pages of two`);

    const afterLast = await lister.call('GET', '/v2/tenants?after=t-05');
    t.same(afterLast.body.results, []);
    t.equal(afterLast.body.next_after, null);

    for (const bad of ['limit=0', 'limit=1001', 'limit=abc', 'colour=blue']) {
      const r = await lister.call('GET', `/v2/tenants?${bad}`);
      t.equal(r.status, 400, bad);
      t.equal(r.body.code, 'ENS_ERR_VALIDATION', bad);
      t.ok(Array.isArray(r.body.errors) && r.body.errors.length > 0, `${bad}: errors[]`);
    }
  });

  t.test('PATCH changes name and settings', async (t) => {
    const created = await owner.call('POST', '/v2/tenants', {
      body: { tenant: 'patch-me', name: 'Old', settings: { a: '1' } },
    });
    t.equal(created.status, 201);

    const renamed = await owner.call('PATCH', '/v2/tenants/patch-me', { body: { name: 'New' } });
    t.equal(renamed.status, 200);
    t.equal(renamed.body.name, 'New');
    t.same(renamed.body.settings, { a: '1' }, 'settings untouched when not given');
    t.ok(renamed.body.updated_at >= created.body.updated_at, 'updated_at moves forward');

    const resettled = await owner.call('PATCH', '/v2/tenants/patch-me', {
      body: { settings: { b: 2 } },
    });
    t.equal(resettled.status, 200);
    t.same(resettled.body.settings, { b: 2 }, 'settings are replaced, not merged');
    t.equal(resettled.body.name, 'New', 'name untouched when not given');

    const cleared = await owner.call('PATCH', '/v2/tenants/patch-me', { body: { name: null } });
    t.equal(cleared.status, 200);
    t.equal(cleared.body.name, null, 'name: null clears it');

    const read = await owner.call('GET', '/v2/tenants/patch-me');
    t.same(read.body, cleared.body, 'GET shows what PATCH stored');

    const missing = await owner.call('PATCH', '/v2/tenants/nope', { body: { name: 'x' } });
    t.equal(missing.status, 404);
    t.equal(missing.body.code, 'ENS_ERR_TENANT_NOT_FOUND');
  });

  t.test('DELETE is 204; the tenant is gone', async (t) => {
    await svc.tenant(owner, 'delete-me');
    const r = await owner.call('DELETE', '/v2/tenants/delete-me');
    t.equal(r.status, 204);
    t.equal(r.text, '');
    t.equal((await owner.call('GET', '/v2/tenants/delete-me')).status, 404);
    t.equal(await count('delete-me'), 0);
    const again = await owner.call('DELETE', '/v2/tenants/delete-me');
    t.equal(again.status, 404, 'deleting an unknown tenant is 404');
    t.equal(again.body.code, 'ENS_ERR_TENANT_NOT_FOUND');
    t.equal(
      (await owner.call('POST', '/v2/tenants', { body: { tenant: 'delete-me' } })).status,
      201,
      'the id can be provisioned again',
    );
  });

  t.test('DELETE of a tenant with messages is 409 and keeps it', async (t) => {
    await svc.tenant(owner, 'busy');
    t.equal((await svc.send(owner, smsHandoff('busy', ['+15551230001']))).status, 202);
    const r = await owner.call('DELETE', '/v2/tenants/busy');
    t.equal(r.status, 409);
    t.equal(r.body.code, 'ENS_ERR_TENANT_IN_USE');
    t.match(r.body.detail, /busy/);
    t.equal((await owner.call('GET', '/v2/tenants/busy')).status, 200, 'still there');
    t.equal(
      (await svc.send(owner, smsHandoff('busy', ['+15551230002']))).status,
      202,
      'and still usable',
    );
  });

  t.test("one client's tenants are invisible to another", async (t) => {
    await svc.tenant(owner, 'private');
    t.equal((await stranger.call('GET', '/v2/tenants/private')).status, 404, 'GET');
    t.equal(
      (await stranger.call('PATCH', '/v2/tenants/private', { body: { name: 'hijacked' } })).status,
      404,
      'PATCH',
    );
    t.equal((await stranger.call('DELETE', '/v2/tenants/private')).status, 404, 'DELETE');
    const list = await stranger.call('GET', '/v2/tenants');
    t.notOk(
      list.body.results.some((r: { tenant: string }) => r.tenant === 'private'),
      'not listed',
    );

    const send = await svc.send(stranger, smsHandoff('private', ['+15551230001']));
    t.equal(send.status, 400, "sending for another client's tenant is refused");
    t.equal(send.body.code, 'ENS_ERR_TENANT_NOT_PROVISIONED');

    const own = await stranger.call('POST', '/v2/tenants', {
      body: { tenant: 'private', name: 'Mine' },
    });
    t.equal(own.status, 201, 'the other client provisions the same id as its own tenant');
    t.equal(own.body.name, 'Mine');
    const original = await owner.call('GET', '/v2/tenants/private');
    t.equal(original.status, 200);
    t.equal(original.body.name, null, "the owner's tenant is untouched");
    t.equal(await count('private'), 2, 'two independent rows');
  });

  t.test('invalid bodies are 400 with errors[] and store nothing', async (t) => {
    const cases: [string, string, string, unknown, string][] = [
      ['missing tenant', 'POST', '/v2/tenants', { name: 'x' }, '/tenant'],
      ['empty tenant', 'POST', '/v2/tenants', { tenant: '' }, '/tenant'],
      ['tenant with a slash', 'POST', '/v2/tenants', { tenant: 'a/b' }, '/tenant'],
      ['tenant with a space', 'POST', '/v2/tenants', { tenant: 'a b' }, '/tenant'],
      ['tenant too long', 'POST', '/v2/tenants', { tenant: 'x'.repeat(201) }, '/tenant'],
      ['tenant not a string', 'POST', '/v2/tenants', { tenant: 42 }, '/tenant'],
      ['unknown field', 'POST', '/v2/tenants', { tenant: 'ok-id', colour: 'blue' }, '/colour'],
      [
        'settings not an object',
        'POST',
        '/v2/tenants',
        { tenant: 'ok-id', settings: 'x' },
        '/settings',
      ],
      ['empty name', 'POST', '/v2/tenants', { tenant: 'ok-id', name: '' }, '/name'],
      ['body is an array', 'POST', '/v2/tenants', [{ tenant: 'ok-id' }], '/'],
      ['PATCH with nothing to change', 'PATCH', '/v2/tenants/acme', {}, '/'],
      ['PATCH an unknown field', 'PATCH', '/v2/tenants/acme', { tenant: 'renamed' }, '/tenant'],
      ['PATCH settings not an object', 'PATCH', '/v2/tenants/acme', { settings: [1] }, '/settings'],
    ];
    const before = (
      await svc.rt.db.query('SELECT count(*)::int AS n, max(updated_at) AS u FROM tenants')
    ).rows[0];
    for (const [name, method, path, body, errPath] of cases) {
      const r = await owner.call(method, path, { body });
      t.equal(r.status, 400, `${name}: 400`);
      t.equal(r.body.code, 'ENS_ERR_VALIDATION', `${name}: code`);
      t.type(r.body.detail, 'string');
      t.ok(Array.isArray(r.body.errors) && r.body.errors.length > 0, `${name}: errors[]`);
      t.ok(
        r.body.errors.some(
          (e: { path: string }) => e.path === errPath || e.path.startsWith(`${errPath}/`),
        ),
        `${name}: an error at ${errPath} (${JSON.stringify(r.body.errors)})`,
      );
    }
    const notJson = await owner.call('POST', '/v2/tenants', {
      headers: { 'content-type': 'application/json' },
      body: undefined,
    });
    t.equal(notJson.status, 400, 'an empty JSON body');
    const after = (
      await svc.rt.db.query('SELECT count(*)::int AS n, max(updated_at) AS u FROM tenants')
    ).rows[0];
    t.same(after, before, 'no tenant created or changed');
  });
});
