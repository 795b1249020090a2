import t from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService } from '../harness/service.ts';
import { bundleEns } from '../harness/ens-bundle.ts';

/**
 * `ens clients schedule` and `ens token`, run as a separate process against the same database as
 * a running service. Split from clients.test.ts, which with them ran 110-120 s in a full run of
 * the suite, against tap's 120 s per file.
 */

const [svc, runBuilt] = await Promise.all([startTestService(t), bundleEns(t)]);

/** Runs `ens …` and parses its stdout as one JSON document. */
async function ens(args: string[]): Promise<any> {
  const r = await runBuilt(args, svc.env);
  if (r.code !== 0) throw new Error(`ens ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function get(path: string, token: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${svc.baseUrl}${path}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

t.test(
  "schedule: a client's weight, priority event types and tenant weights are set and shown",
  async (t) => {
    const c = await svc.createClient();
    await svc.tenant(c, 'retail');
    const shown = await ens([
      'clients',
      'schedule',
      c.clientId,
      '--weight',
      '3',
      '--priority-events',
      'otp.*, auth.code',
    ]);
    t.same(shown, {
      client_id: c.clientId,
      weight: 3,
      priority_event_types: ['otp.*', 'auth.code'],
      tenant_weights: {},
    });
    t.same(
      (await ens(['clients', 'schedule', c.clientId, '--tenant', 'retail', '--weight', '5']))
        .tenant_weights,
      { retail: 5 },
      "a tenant's weight within its client",
    );
    t.match(
      await ens(['clients', 'schedule', c.clientId]),
      { weight: 3, tenant_weights: { retail: 5 } },
      'without options it shows what is set',
    );

    const refusals: [string[], number, RegExp][] = [
      [
        ['--weight', '0'],
        2,
        /--weight: a weight is a whole number from 1 to 100 \(or default\); "0" is not one/,
      ],
      [['--weight', '101'], 2, /from 1 to 100/],
      [['--priority-events', 'a b'], 2, /--priority-events: .*"a b" is not one/],
      [['--tenant', 'retail', '--priority-events', 'x'], 2, /priority event types are per client/],
      [['--tenant', 'nope', '--weight', '2'], 1, /has no tenant "nope"/],
    ];
    for (const [args, code, message] of refusals) {
      const r = await runBuilt(['clients', 'schedule', c.clientId, ...args], svc.env);
      t.equal(r.code, code, `${args.join(' ')}: exit ${code}`);
      t.match(r.stderr, message);
    }
    t.match(
      await ens(['clients', 'schedule', c.clientId]),
      { weight: 3, priority_event_types: ['otp.*', 'auth.code'] },
      'a refusal changes nothing',
    );
    t.match(
      await ens([
        'clients',
        'schedule',
        c.clientId,
        '--weight',
        'default',
        '--priority-events',
        'none',
      ]),
      { weight: 1, priority_event_types: [] },
      'back to the defaults',
    );
  },
);

t.test('token: prints a working token, or nothing and a reason with a non-zero exit', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ens-token-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'client.json');
  const c = await svc.createClient();
  await writeFile(file, JSON.stringify({ client_id: c.clientId, client_secret: c.clientSecret }));
  const ok = await runBuilt(['token', '--client-file', file, '--url', svc.baseUrl], svc.env);
  t.equal(ok.code, 0, ok.stderr);
  const token = ok.stdout.trim();
  t.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'stdout is the token alone');
  t.equal((await get('/v2/tenants', token)).status, 200, 'and it works');

  await writeFile(file, JSON.stringify({ client_id: c.clientId, client_secret: 'wrong' }));
  const refused = await runBuilt(['token', '--client-file', file, '--url', svc.baseUrl], svc.env);
  t.equal(refused.code, 1, 'a wrong secret: exit 1');
  t.equal(refused.stdout, '', 'nothing on stdout, so TOKEN=$(…) is not set to a word');
  t.match(refused.stderr, /^ens: ENS at http:\/\/127\.0\.0\.1:\d+ refused the token request: /);

  const missing = await runBuilt(
    ['token', '--client-file', join(dir, 'nope.json'), '--url', svc.baseUrl],
    svc.env,
  );
  t.equal(missing.code, 2);
  t.match(missing.stderr, /nope\.json: no such file/);
  await writeFile(file, '');
  const empty = await runBuilt(['token', '--client-file', file, '--url', svc.baseUrl], svc.env);
  t.equal(empty.code, 2, 'an empty file (ens clients create failed) is a usage error');
  t.match(empty.stderr, /not the JSON that ens clients create prints/);
  const away = await runBuilt(
    [
      'token',
      '--client-file',
      file.replace('client.json', 'x.json'),
      '--url',
      'http://127.0.0.1:9',
    ],
    { ...svc.env, CLIENT_ID: c.clientId, CLIENT_SECRET: c.clientSecret },
  );
  t.equal(away.code, 2, 'the file is checked before anything is sent');
  const noServer = await runBuilt(['token', '--url', 'http://127.0.0.1:9'], {
    ...svc.env,
    CLIENT_ID: c.clientId,
    CLIENT_SECRET: c.clientSecret,
  });
  t.equal(noServer.code, 1);
  t.match(noServer.stderr, /cannot reach ENS at http:\/\/127\.0\.0\.1:9 .*is it running\?/);
});
