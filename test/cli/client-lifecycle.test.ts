import t from 'tap';
import { bundleEns, ensJson } from '../harness/ens-bundle.ts';
import { smsHandoff, startTestService, waitFor } from '../harness/service.ts';

/**
 * A client's end of life from the CLI: found as "a disabled client cannot be enabled again and no
 * client can be deleted", so a leaked secret meant up to ENS_TOKEN_TTL of exposure or a client
 * lost for good. Enable undoes disable; delete (of a disabled client only) erases its secrets for
 * good and keeps its records; every change is in the audit log.
 */

const [svc, runBuilt] = await Promise.all([startTestService(t), bundleEns(t)]);
const ens = ensJson(runBuilt, svc.env);

async function mint(id: string, secret: string): Promise<number> {
  const res = await fetch(`${svc.baseUrl}/v1/oauth2/token/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: id,
      client_secret: secret,
    }),
  });
  return res.status;
}

t.test('a disabled client is enabled again and mints tokens', async (t) => {
  const c = await svc.createClient();
  t.equal((await ens(['clients', 'disable', c.clientId])).code, 0);
  t.equal(await mint(c.clientId, c.clientSecret), 401, 'disabled: refused');
  const r = await ens(['clients', 'enable', c.clientId]);
  t.equal(r.code, 0, r.stderr);
  t.same(r.json, { client_id: c.clientId, disabled: false });
  t.equal(await mint(c.clientId, c.clientSecret), 200, 'enabled: mints again');
  const unknown = await ens(['clients', 'enable', 'ens_no_such_client']);
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /no client with id ens_no_such_client/);
});

t.test('delete: only a disabled client; secrets gone for good, records kept', async (t) => {
  const c = await svc.createClient({ callbackSecret: true });
  await svc.tenant(c, 'acme');
  const sent = await svc.send(c, smsHandoff('acme', ['+15551230001'], { reference: 'kept' }));
  t.equal(sent.status, 202);
  await waitFor(
    async () => (await svc.feed(c, 'reference=kept')).some((d) => d.status === 'sent'),
    10_000,
    'the delivery to be sent',
  );

  const active = await ens(['clients', 'delete', c.clientId]);
  t.equal(active.code, 1, 'an active client is refused');
  t.match(active.stderr, `client ${c.clientId} is active: ens clients disable ${c.clientId} first`);
  t.equal(await mint(c.clientId, c.clientSecret), 200, 'and keeps working');

  t.equal((await ens(['clients', 'disable', c.clientId])).code, 0);
  const deleted = await ens(['clients', 'delete', c.clientId]);
  t.equal(deleted.code, 0, deleted.stderr);
  t.same(deleted.json, { client_id: c.clientId, deleted: true });

  t.equal(await mint(c.clientId, c.clientSecret), 401, 'its secret mints nothing');
  const row = (
    await svc.rt.db.query('SELECT secret_hash, callback_secret_enc FROM clients WHERE id = $1', [
      c.clientId,
    ])
  ).rows[0];
  t.same(row, { secret_hash: '', callback_secret_enc: null }, 'both secrets are erased');
  const list = await ens(['clients', 'list']);
  t.notOk(
    (list.json as { client_id: string }[]).some((x) => x.client_id === c.clientId),
    'it is no longer listed',
  );
  for (const sub of ['enable', 'delete', 'rotate-secret']) {
    const again = await ens(['clients', sub, c.clientId]);
    t.equal(again.code, 1, `${sub} after delete: exit 1`);
    t.match(again.stderr, /no client with id/);
  }
  const kept = await svc.rt.db.query(
    'SELECT status FROM deliveries WHERE client_id = $1 AND reference = $2',
    [c.clientId, 'kept'],
  );
  t.same(kept.rows, [{ status: 'sent' }], 'its deliveries stay in the record');

  const audit = await svc.rt.db.query(
    'SELECT actor, action FROM audit_log WHERE target = $1 ORDER BY id',
    [c.clientId],
  );
  t.same(
    audit.rows.map((r) => r.action).filter((a) => a !== 'client.create'),
    ['client.disable', 'client.delete'],
    'disable and delete are audited (the refused delete is not)',
  );
  t.ok(audit.rows.every((r) => r.actor === 'cli' || r.action === 'client.create'));
});
