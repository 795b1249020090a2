import t from 'tap';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestService, smsHandoff, waitFor } from '../harness/service.ts';
import { startReceiver } from '../harness/receiver.ts';
import { runEns } from '../harness/ens-process.ts';
import { bundleEns } from '../harness/ens-bundle.ts';

/**
 * The operator's `ens clients …` commands, run as a separate process against the same database
 * as a running service: one JSON document on stdout, secrets shown once and never stored in
 * clear, and every change visible to the running API at once.
 */

// Most runs use the bundled command (same source, a fraction of tsx's start-up cost); the first
// `clients create` and `--help` go through runEns, the path `npx ens` takes in a clone.
const [svc, runBuilt] = await Promise.all([startTestService(t), bundleEns(t)]);

/** What earlier cases made, for the final `clients list` (one CLI run checks them all). */
const created: { billing?: any; alerts?: any; disabled?: string; limited?: string } = {};

/** Runs `ens …` and parses its stdout as one JSON document. */
async function ens(args: string[]): Promise<any> {
  const r = await runBuilt(args, svc.env);
  if (r.code !== 0) throw new Error(`ens ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function mint(
  clientId: string,
  clientSecret: string,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${svc.baseUrl}/v1/oauth2/token/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    }),
  });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

async function get(path: string, token: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${svc.baseUrl}${path}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

/** Rows of any table whose text contains `needle`: a secret must be in none of them. */
async function rowsContaining(needle: string): Promise<string[]> {
  const { rows: tables } = await svc.rt.db.query<{ name: string }>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'`,
  );
  const hits: string[] = [];
  for (const { name } of tables) {
    const { rows } = await svc.rt.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${name}" r WHERE strpos(r::text, $1) > 0`,
      [needle],
    );
    if (rows[0]!.n > 0) hits.push(name);
  }
  return hits;
}

t.test('clients create prints one JSON object with the secrets, shown once', async (t) => {
  const [r, withCbRun] = await Promise.all([
    runEns(['clients', 'create', '--name', 'billing'], svc.env),
    runBuilt(['clients', 'create', '--name', 'alerts', '--callback-secret'], svc.env),
  ]);
  t.equal(r.code, 0, r.stderr);
  const issued = JSON.parse(r.stdout); // throws unless stdout is exactly one JSON document
  created.billing = issued;
  t.same(
    Object.keys(issued).sort(),
    ['client_id', 'client_secret'],
    'client_id and client_secret, nothing else',
  );
  t.type(issued.client_id, 'string');
  t.ok(issued.client_secret.length >= 32, 'a long random secret');

  t.equal(withCbRun.code, 0, withCbRun.stderr);
  const withCb = JSON.parse(withCbRun.stdout);
  created.alerts = withCb;
  t.same(
    Object.keys(withCb).sort(),
    ['callback_secret', 'client_id', 'client_secret'],
    '--callback-secret adds callback_secret',
  );
  t.match(withCb.callback_secret, /^whsec_[A-Za-z0-9+/]+=*$/);

  t.test('the client secret mints a client-credentials token', async (t) => {
    const tok = await mint(issued.client_id, issued.client_secret);
    t.equal(tok.status, 200);
    t.match(tok.body, { token_type: 'Bearer', expires_in: Number });
    t.equal(
      (await get('/v2/tenants', tok.body.access_token)).status,
      200,
      'and the token works on /v2/',
    );
  });

  t.test(
    'the database holds a hash of the client secret and the callback secret encrypted',
    async (t) => {
      t.same(await rowsContaining(issued.client_secret), [], 'no row contains the client secret');
      t.same(
        await rowsContaining(withCb.client_secret),
        [],
        'no row contains the other client secret',
      );
      t.same(
        await rowsContaining(withCb.callback_secret),
        [],
        'no row contains the callback secret',
      );
      t.same(
        await rowsContaining(withCb.callback_secret.slice('whsec_'.length)),
        [],
        'nor its base64 key',
      );
      const { rows } = await svc.rt.db.query(
        'SELECT secret_hash, callback_secret_enc FROM clients WHERE id = $1',
        [withCb.client_id],
      );
      t.ok(
        rows[0].secret_hash && rows[0].secret_hash !== withCb.client_secret,
        'a secret hash is stored',
      );
      t.ok(
        rows[0].callback_secret_enc &&
          !rows[0].callback_secret_enc.includes(withCb.callback_secret),
        'callback_secret_enc does not contain the secret',
      );
      const { rows: plain } = await svc.rt.db.query(
        'SELECT callback_secret_enc FROM clients WHERE id = $1',
        [issued.client_id],
      );
      t.equal(
        plain[0].callback_secret_enc,
        null,
        'a client created without --callback-secret has none',
      );
    },
  );
});

t.test('clients create --out writes the secrets to a new file only its owner reads', async (t) => {
  // Found with `ens clients create … > demo-client.secret.json`: a world-readable file of secrets.
  const dir = await mkdtemp(join(tmpdir(), 'ens-out-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'demo-client.secret.json');
  const r = await ens(['clients', 'create', '--name', 'to-a-file', '--out', file]);
  t.same(Object.keys(r).sort(), ['client_id', 'secrets_written_to'], 'no secret on stdout');
  t.equal((await stat(file)).mode & 0o777, 0o600, 'mode 0600');
  const saved = JSON.parse(await readFile(file, 'utf8'));
  t.equal(saved.client_id, r.client_id);
  t.equal((await mint(saved.client_id, saved.client_secret)).status, 200, 'the file mints');

  const before = (await ens(['clients', 'list'])).length;
  const again = await runBuilt(['clients', 'create', '--name', 'twice', '--out', file], svc.env);
  t.equal(again.code, 2, 'an existing file is refused');
  t.match(again.stderr, /the file exists/);
  t.equal((await ens(['clients', 'list'])).length, before, 'and no client is created');
  t.same(JSON.parse(await readFile(file, 'utf8')), saved, 'the file is untouched');
});

t.test('rotate-secret: the old secret stops minting, the new one mints', async (t) => {
  const c = await svc.createClient({ name: 'rotating' });
  t.equal((await mint(c.clientId, c.clientSecret)).status, 200);
  const rotated = await ens(['clients', 'rotate-secret', c.clientId]);
  t.same(Object.keys(rotated).sort(), ['client_id', 'client_secret']);
  t.equal(rotated.client_id, c.clientId);
  t.not(rotated.client_secret, c.clientSecret, 'a new secret is issued');
  const old = await mint(c.clientId, c.clientSecret);
  t.equal(old.status, 401, 'the old secret is refused');
  t.equal(old.body?.error, 'invalid_client');
  t.equal((await mint(c.clientId, rotated.client_secret)).status, 200, 'the new secret mints');
  t.same(await rowsContaining(rotated.client_secret), [], 'the new secret is not stored either');
});

t.test('issue-callback-secret: callbacks after it are signed with the new secret', async (t) => {
  const c = await svc.createClient({ callbackSecret: true });
  await svc.tenant(c, 'acme');
  const receiver = await startReceiver(t, [200]);
  const issued = await ens(['clients', 'issue-callback-secret', c.clientId]);
  t.same(Object.keys(issued).sort(), ['callback_secret', 'client_id']);
  t.equal(issued.client_id, c.clientId);
  t.match(issued.callback_secret, /^whsec_/);
  t.not(issued.callback_secret, c.callbackSecret, 'a new secret is returned');
  t.same(await rowsContaining(issued.callback_secret), [], 'and it is stored encrypted');

  await svc.send(c, smsHandoff('acme', ['+15554440001'], { callback_url: receiver.url }));
  await waitFor(async () => receiver.posts.length >= 1, 10_000, 'the callback');
  const post = receiver.posts[0]!;
  const sig = post.headers['x-ens-signature'];
  t.equal(
    sig,
    createHmac('sha256', issued.callback_secret).update(post.raw).digest('hex'),
    'signed with the new secret',
  );
  t.not(
    sig,
    createHmac('sha256', c.callbackSecret!).update(post.raw).digest('hex'),
    'not with the old one',
  );
});

t.test('a client issued its first callback secret starts getting posts', async (t) => {
  const c = await svc.createClient({ callbackSecret: false });
  await svc.tenant(c, 'acme');
  const issued = (await svc.rt.clients.issueCallbackSecret(c.clientId))!;
  const receiver = await startReceiver(t, [200]);
  await svc.send(c, smsHandoff('acme', ['+15554440002'], { callback_url: receiver.url }));
  await waitFor(async () => receiver.posts.length >= 1, 10_000, 'the first callback');
  const post = receiver.posts[0]!;
  t.equal(
    post.headers['x-ens-signature'],
    createHmac('sha256', issued.callback_secret!).update(post.raw).digest('hex'),
  );
});

t.test('disable: the client cannot mint and its token is refused at once', async (t) => {
  const c = await svc.createClient();
  const token = await c.token();
  t.equal((await get('/v2/tenants', token)).status, 200);
  t.same(await ens(['clients', 'disable', c.clientId]), { client_id: c.clientId, disabled: true });
  const refused = await waitFor(
    async () => {
      const r = await get('/v2/tenants', token);
      return r.status === 401 ? r : undefined;
    },
    2_000,
    'the token to be refused',
  );
  t.match(refused.body, { detail: 'This endpoint requires a client-credentials token.' });
  const again = await mint(c.clientId, c.clientSecret);
  t.equal(again.status, 401, 'the client can no longer mint');
  t.equal(again.body?.error, 'invalid_client');
  created.disabled = c.clientId;
});

t.test('limits: a per-client rate and daily quota are set and shown', async (t) => {
  const c = await svc.createClient();
  const shown = await ens([
    'clients',
    'limits',
    c.clientId,
    '--rate',
    '5',
    '--daily-quota',
    'sms=10',
  ]);
  t.match(shown, {
    client_id: c.clientId,
    rate_limit: 5,
    daily_quota: { sms: 10 },
    usage_today: {},
  });
  t.equal(shown.daily_quota.email, svc.config.dailyQuota, 'channels not named keep the default');
  const { rows } = await svc.rt.db.query(
    'SELECT rate_limit, daily_quota FROM clients WHERE id = $1',
    [c.clientId],
  );
  t.same(rows[0], { rate_limit: 5, daily_quota: { sms: 10 } }, 'stored on the client');
  created.limited = c.clientId;
});

t.test('clients list shows every client and its state, without any secret', async (t) => {
  const r = await runBuilt(['clients', 'list'], svc.env);
  t.equal(r.code, 0, r.stderr);
  const list = JSON.parse(r.stdout);
  const entry = (id: string | undefined) =>
    list.find((c: { client_id: string }) => c.client_id === id);
  t.match(entry(created.alerts.client_id), {
    name: 'alerts',
    disabled: false,
    has_callback_secret: true,
  });
  t.match(entry(created.billing.client_id), {
    name: 'billing',
    disabled: false,
    has_callback_secret: false,
  });
  t.match(entry(created.disabled), { disabled: true });
  t.match(entry(created.limited), { rate_limit: 5, daily_quota: { sms: 10 } });
  const { rows } = await svc.rt.db.query(
    'SELECT secret_hash, callback_secret_enc FROM clients WHERE id = $1',
    [created.alerts.client_id],
  );
  for (const secret of [
    created.billing.client_secret,
    created.alerts.client_secret,
    created.alerts.callback_secret,
    rows[0].secret_hash,
    rows[0].callback_secret_enc,
  ]) {
    t.notOk(r.stdout.includes(secret), 'no secret, hash or ciphertext is printed');
  }
});

t.test('mistakes exit non-zero with one line on stderr; help and migrate work', async (t) => {
  const [unknownSub, noName, noValue, unknownId, wrongKey, unknownCommand, help, migrate] =
    await Promise.all([
      runBuilt(['clients', 'frobnicate'], svc.env),
      runBuilt(['clients', 'create'], svc.env),
      runBuilt(['clients', 'create', '--name'], svc.env),
      runBuilt(['clients', 'disable', 'ens_no_such_client'], svc.env),
      runBuilt(['clients', 'list'], {
        ...svc.env,
        ENS_MASTER_KEY: randomBytes(32).toString('base64'),
      }),
      runBuilt(['frobnicate'], svc.env),
      runEns(['--help'], svc.env),
      runBuilt(['migrate'], svc.env),
    ]);
  for (const [what, r, pattern] of [
    ['an unknown subcommand', unknownSub, /usage: ens clients/],
    ['create without --name', noName, /--name/],
    ['--name without a value', noValue, /--name/],
    ['an unknown client id', unknownId, /no client with id ens_no_such_client/],
    [
      "a master key other than the server's",
      wrongKey,
      /master key cannot open the callback secrets/,
    ],
    ['an unknown command', unknownCommand, /unknown command "frobnicate"/],
  ] as const) {
    t.not(r.code, 0, `${what}: non-zero exit`);
    t.equal(r.stdout, '', `${what}: nothing on stdout`);
    // A command that got as far as its database first says which one it uses (one line), then the
    // error.
    t.match(
      r.stderr,
      /^(ens: using the database at DATABASE_URL [^\n]+\n)?ens: [^\n]+\n$/,
      `${what}: one line on stderr for the error (${JSON.stringify(r.stderr)})`,
    );
    t.match(r.stderr, pattern, `${what}: the line says what is wrong`);
  }
  t.equal(help.code, 0, 'ens --help exits 0');
  t.match(help.stdout, /ens clients create --name NAME/);
  t.equal(migrate.code, 0, migrate.stderr);
  t.same(
    JSON.parse(migrate.stdout),
    { applied: [] },
    'migrate on a migrated database applies nothing',
  );
});
