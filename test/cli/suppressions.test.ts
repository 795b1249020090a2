import t from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { smsHandoff, startTestService, waitFor } from '../harness/service.ts';
import { bundleEns, ensJson } from '../harness/ens-bundle.ts';

/**
 * `ens suppressions list|add|remove`, run as a separate process against the database of a running
 * service: what the command writes, the running API and send path see at once; exit 0 when done,
 * 1 with a clear message on stderr for anything wrong with what was asked (2, as for every ens
 * command, for a command line node cannot parse). Import and export: suppressions-import.test.ts.
 */

const [svc, run] = await Promise.all([startTestService(t), bundleEns(t)]);
const client = await svc.createClient();
await svc.tenant(client, 'acme');
const dir = await mkdtemp(join(tmpdir(), 'ens-suppressions-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));

const scope = ['--client', client.clientId, '--tenant', 'acme'];

/** Runs `ens …`; with `json`, stdout must be one JSON document. */
const ens = ensJson(run, svc.env);

const rowsOf = async (tenant: string) =>
  (
    await svc.rt.db.query(
      `SELECT channel, address, scope, reason, source, detail, created_by FROM suppressions WHERE client_id = $1 AND tenant = $2 ORDER BY 1, 2, 3`,
      [client.clientId, tenant],
    )
  ).rows;

t.test(
  'add writes an entry with source cli that the running API and send path see at once; remove ' +
    'lifts it',
  async (t) => {
    const r = await ens([
      'suppressions',
      'add',
      ...scope,
      '--channel',
      'sms',
      '--address',
      '+1 (555) 123-0001',
      '--reason',
      'opt_out',
      '--detail',
      'STOP by letter',
    ]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.json, {
      tenant: 'acme',
      channel: 'sms',
      address: '+15551230001',
      scope: '*',
      reason: 'opt_out',
      source: 'cli',
      created_by: 'cli',
      detail: 'STOP by letter',
      created: true,
    });

    const api = await client.call('GET', '/v2/tenants/acme/suppressions/sms/%2B15551230001');
    t.equal(api.status, 200);
    t.equal(api.body.results[0].source, 'cli');
    const sent = await svc.send(client, smsHandoff('acme', ['+15551230001']));
    const id = sent.body.deliveries[0].delivery_id;
    const row = await waitFor(
      async () =>
        (await svc.feed(client)).find((d) => d.delivery_id === id && d.status !== 'pending'),
      15_000,
      'the send to end',
    );
    t.equal(row.status, 'failed');
    t.match(row.last_error, /^suppressed: \+15551230001 .*\(opt_out, cli\).*: STOP by letter$/);

    const audit = await svc.rt.db.query(
      `SELECT actor, action, target FROM audit_log WHERE action LIKE 'suppression.%' ORDER BY at`,
    );
    t.match(
      audit.rows,
      [{ actor: 'cli', action: 'suppression.add', target: `${client.clientId}/acme` }],
      "audited beside the console's actions",
    );

    const scoped = await ens([
      'suppressions',
      'add',
      ...scope,
      '--channel',
      'email',
      '--address',
      'Ann@Example.COM',
      '--scope',
      'newsletter.weekly',
    ]);
    t.equal(scoped.code, 0, scoped.stderr);
    t.match(scoped.json, {
      address: 'ann@example.com',
      scope: 'newsletter.weekly',
      reason: 'manual',
    });
    const again = await ens([
      'suppressions',
      'add',
      ...scope,
      '--channel',
      'email',
      '--address',
      'ann@example.com',
      '--scope',
      'newsletter.weekly',
      '--reason',
      'complaint',
    ]);
    t.equal(again.code, 0);
    t.equal(again.json.created, false, 'the same key: replaced');

    const removed = await ens([
      'suppressions',
      'remove',
      ...scope,
      '--channel',
      'sms',
      '--address',
      '15551230001',
    ]);
    t.equal(removed.code, 0, removed.stderr);
    t.equal(removed.json.removed, 1);
    t.equal(
      (await client.call('GET', '/v2/tenants/acme/suppressions/sms/%2B15551230001')).status,
      404,
      'gone for the API too',
    );
    const none = await ens([
      'suppressions',
      'remove',
      ...scope,
      '--channel',
      'sms',
      '--address',
      '15551230001',
    ]);
    t.equal(none.code, 1, 'nothing to remove');
    t.match(none.stderr, /ens: \+15551230001 \(sms\) has no entry in tenant "acme"\n$/);
  },
);

t.test('wrong input: exit 1 with a clear message on stderr, and nothing written', async (t) => {
  const before = JSON.stringify(await rowsOf('acme'));
  const cases: [string[], RegExp][] = [
    [
      ['suppressions', 'add', ...scope, '--channel', 'sms', '--address', 'not-a-phone'],
      /"not-a-phone" is not a phone number \(E\.164/,
    ],
    [
      ['suppressions', 'add', ...scope, '--channel', 'email', '--address', 'nobody'],
      /"nobody" is not an email address/,
    ],
    [
      ['suppressions', 'add', ...scope, '--channel', 'fax', '--address', '+15551230009'],
      /--channel must be one of sms, email, push, whatsapp/,
    ],
    [
      [
        'suppressions',
        'add',
        ...scope,
        '--channel',
        'sms',
        '--address',
        '+15551230009',
        '--reason',
        'bored',
      ],
      /--reason must be one of/,
    ],
    [
      [
        'suppressions',
        'add',
        ...scope,
        '--channel',
        'sms',
        '--address',
        '+15551230009',
        '--scope',
        'two words',
      ],
      /--scope must be/,
    ],
    [
      [
        'suppressions',
        'add',
        ...scope,
        '--channel',
        'sms',
        '--address',
        '+15551230009',
        '--expires-at',
        '2020-01-01T00:00:00Z',
      ],
      /--expires-at must be a date-time in the future/,
    ],
    [['suppressions', 'add', ...scope, '--address', '+15551230009'], /--channel is required/],
    [
      [
        'suppressions',
        'add',
        '--client',
        client.clientId,
        '--channel',
        'sms',
        '--address',
        '+15551230009',
      ],
      /--tenant is required/,
    ],
    [
      [
        'suppressions',
        'add',
        '--client',
        'no-such-client',
        '--tenant',
        'acme',
        '--channel',
        'sms',
        '--address',
        '+15551230009',
      ],
      /no client with id no-such-client/,
    ],
    [
      [
        'suppressions',
        'add',
        '--client',
        client.clientId,
        '--tenant',
        'nowhere',
        '--channel',
        'sms',
        '--address',
        '+15551230009',
      ],
      /has no tenant "nowhere"/,
    ],
    [
      ['suppressions', 'list', ...scope, '--address', '+15551230009'],
      /--channel \(with --address\) is required/,
    ],
    [['suppressions', 'import', join(dir, 'missing.csv'), ...scope], /cannot read/],
    [['suppressions', 'frobnicate', ...scope], /usage:/],
  ];
  // Side by side: none of them writes, and each start of the command waits mostly on its database.
  const results = await Promise.all(cases.map(([args]) => ens(args)));
  for (const [i, [args, stderr]] of cases.entries()) {
    const r = results[i]!;
    t.equal(r.code, 1, `${args.slice(1).join(' ')}: exit 1`);
    t.match(r.stderr, stderr, `${args.slice(1, 2).join(' ')}: ${r.stderr.split('\n')[0]}`);
    t.equal(r.stdout, '', 'nothing on stdout');
    t.match(
      r.stderr,
      /^(ens: using the database at DATABASE_URL [^\n]+\n)?ens: [^\n]+\n$/,
      'one line on stderr for the error',
    );
  }
  const unknownOption = await ens(['suppressions', 'list', ...scope, '--colour', 'red']);
  t.equal(unknownOption.code, 2, 'a command line node cannot parse is 2, as for every ens command');
  t.equal(JSON.stringify(await rowsOf('acme')), before, 'nothing was written');
});

t.test('list pages through every entry, with filters, as one JSON array', async (t) => {
  const c = await svc.createClient();
  await svc.tenant(c, 'big');
  await svc.rt.suppressions.upsert(
    c.clientId,
    Array.from({ length: 2500 }, (_, i) => ({
      tenant: 'big',
      channel: 'sms' as const,
      address: `+1555${String(3_000_000 + i)}`,
      reason: (i % 5 === 0 ? 'complaint' : 'manual') as 'complaint' | 'manual',
      source: 'import' as const,
    })),
  );
  const big = ['--client', c.clientId, '--tenant', 'big'];
  const [all, complaints, one, empty] = await Promise.all([
    ens(['suppressions', 'list', ...big]),
    ens(['suppressions', 'list', ...big, '--reason', 'complaint']),
    ens(['suppressions', 'list', ...big, '--channel', 'sms', '--address', '15553000007']),
    ens(['suppressions', 'list', ...big, '--channel', 'email']),
  ]);
  t.equal(all.code, 0, all.stderr);
  t.equal(all.json.length, 2500, 'all 2,500, past the 1,000 of a page');
  t.equal(new Set(all.json.map((e: any) => e.address)).size, 2500, 'each once');
  t.equal(complaints.json.length, 500);
  t.same(
    one.json.map((e: any) => e.address),
    ['+15553000007'],
  );
  t.equal(empty.code, 0);
  t.same(empty.json, [], 'an empty list is []');
});
