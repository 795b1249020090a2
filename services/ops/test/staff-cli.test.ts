import t from 'tap';
import { startTestService } from '../../../test/harness/service.ts';
import { runEns } from '../../../test/harness/ens-process.ts';
import { StaffStore } from '../src/staff/staff-store.ts';

/** `ens staff grant|revoke|list` as an operator runs it, against a running service's database. */
const svc = await startTestService(t, {
  env: {
    ENS_OPS_ISSUER: 'https://id.example.com',
    ENS_OPS_CLIENT_ID: 'c',
    ENS_OPS_CLIENT_SECRET: 's',
    ENS_OPS_SUPERUSERS: 'boss@example.com',
  },
  roles: ['api'],
});

async function ens(args: string[]): Promise<any> {
  const r = await runEns(args, svc.env);
  if (r.code !== 0) throw new Error(`ens ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

t.test('grant before the first sign-in, list, revoke; audited as cli', async (t) => {
  const granted = await ens(['staff', 'grant', 'Dana@Example.com']);
  t.match(granted, { email: 'dana@example.com', granted: true, pending: true });
  const store = new StaffStore(svc.rt.db);
  const { staff } = await store.recordSignIn({
    issuer: 'https://id.example.com',
    subject: 'sub-dana',
    email: 'dana@example.com',
    name: 'Dana',
    groups: [],
  });
  t.equal(staff.granted, true, 'applied at first sign-in');
  await store.recordSignIn({
    issuer: 'https://id.example.com',
    subject: 'sub-boss',
    email: 'boss@example.com',
    name: null,
    groups: [],
  });

  const list = await ens(['staff', 'list']);
  t.match(
    list.staff.find((s: any) => s.email === 'dana@example.com'),
    { superuser: true, rights_from: ['grant'] },
  );
  t.match(
    list.staff.find((s: any) => s.email === 'boss@example.com'),
    { superuser: true, rights_from: ['allow-list'] },
  );
  t.same(list.pending_grants, []);

  const revoked = await ens(['staff', 'revoke', 'dana@example.com']);
  t.match(revoked, { email: 'dana@example.com', revoked: true, still_superuser: false });
  const boss = await ens(['staff', 'revoke', 'boss@example.com']);
  t.match(boss, {
    revoked: false,
    still_superuser: true,
    note: /still a superuser through configuration/,
  });

  const { rows } = await svc.rt.db.query(
    `SELECT actor, action, target FROM audit_log WHERE actor = 'cli' ORDER BY id`,
  );
  t.same(rows, [
    { actor: 'cli', action: 'staff.grant', target: 'dana@example.com' },
    { actor: 'cli', action: 'staff.revoke', target: 'dana@example.com' },
    { actor: 'cli', action: 'staff.revoke', target: 'boss@example.com' },
  ]);

  const bad = await runEns(['staff', 'grant', 'not-an-email'], svc.env);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /usage: ens staff grant EMAIL/);
});

t.test('ens clients create, rotate-secret and disable are in the audit log as cli', async (t) => {
  const created = await ens(['clients', 'create', '--name', 'billing-from-cli']);
  t.match(created, { client_id: /.+/, client_secret: /.+/ });
  await ens(['clients', 'rotate-secret', created.client_id]);
  await ens(['clients', 'disable', created.client_id]);
  const { rows } = await svc.rt.db.query(
    `SELECT actor, action, detail FROM audit_log WHERE target = $1 ORDER BY id`,
    [created.client_id],
  );
  t.same(rows, [
    {
      actor: 'cli',
      action: 'client.create',
      detail: { name: 'billing-from-cli', callback_secret: false },
    },
    { actor: 'cli', action: 'client.rotate_secret', detail: {} },
    { actor: 'cli', action: 'client.disable', detail: {} },
  ]);
  t.notOk(
    rows.some((r) => JSON.stringify(r).includes(created.client_secret)),
    'no secret in the audit log',
  );
});
