import t from 'tap';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  ClientStore,
  deliveryOfReturnPath,
  deliveryOfUnsubscribeMailto,
  migrate,
  normaliseAddress,
  readDeliveryToken,
  returnPathFor,
  signDeliveryToken,
  SuppressionStore,
  TenantStore,
  unsubscribeMailtoFor,
} from '@ens/core';
import { createPool, SecretBox } from '@ens/core/internal';
import { startTestEngines } from '../../../test/harness/engines.ts';

t.test('addresses are normalised to one key per recipient', async (t) => {
  t.equal(normaliseAddress('email', '  Ann.Lee@Example.COM '), 'ann.lee@example.com');
  t.equal(
    normaliseAddress('email', 'ann@Bücher.example'),
    'ann@xn--bcher-kva.example',
    'IDNA domain',
  );
  t.equal(normaliseAddress('email', 'ann@xn--bcher-kva.example'), 'ann@xn--bcher-kva.example');
  t.equal(normaliseAddress('email', 'a"b@example.com'), null);
  t.equal(normaliseAddress('email', 'no-at-sign'), null);
  t.equal(normaliseAddress('email', 'ann@localhost'), null, 'a domain without a dot');
  t.equal(normaliseAddress('email', `${'a'.repeat(250)}@example.com`), null, 'too long');
  t.equal(normaliseAddress('sms', '15551230001'), '+15551230001');
  t.equal(normaliseAddress('whatsapp', '+1 (555) 123-0001'), '+15551230001');
  t.equal(normaliseAddress('sms', '+0123'), null);
  t.equal(
    normaliseAddress('push', 'User-42'),
    'User-42',
    "a push user id is the caller's own and keeps its case",
  );
  t.equal(normaliseAddress('push', 'a\u0000b'), null);
});

t.test(
  'delivery tokens: only this key signs them, for one purpose, and they fit a local part',
  async (t) => {
    const key = randomBytes(32);
    const id = randomUUID();
    const token = signDeliveryToken(key, 'unsubscribe', id);
    t.match(token, /^[a-z2-7]{42}$/);
    t.equal(readDeliveryToken(key, 'unsubscribe', token), id);
    t.equal(
      readDeliveryToken(key, 'unsubscribe', token.toUpperCase()),
      id,
      'mail systems may fold case',
    );
    t.equal(readDeliveryToken(key, 'return-path', token), null, 'another purpose');
    t.equal(readDeliveryToken(randomBytes(32), 'unsubscribe', token), null, 'another key');
    const flipped = token.slice(0, 41) + (token[41] === 'a' ? 'b' : 'a');
    t.equal(readDeliveryToken(key, 'unsubscribe', flipped), null, 'a changed character');
    t.equal(readDeliveryToken(key, 'unsubscribe', token.slice(1)), null, 'a short token');
    t.equal(readDeliveryToken(key, 'unsubscribe', '../../etc/passwd'), null);
    const rp = returnPathFor(key, 'bounces.example.com', id);
    t.ok(rp.split('@')[0]!.length <= 64, "within RFC 5321's local-part limit");
    t.equal(deliveryOfReturnPath(key, 'bounces.example.com', rp), id);
    t.equal(
      deliveryOfReturnPath(
        key,
        'bounces.example.com',
        rp.toUpperCase().replace('BOUNCES.EXAMPLE.COM', 'Bounces.Example.com'),
      ),
      id,
    );
    t.equal(deliveryOfReturnPath(key, 'other.example.com', rp), null, 'another domain');
    t.equal(
      deliveryOfUnsubscribeMailto(key, 'bounces.example.com', rp),
      null,
      'a return path is not an unsubscribe address',
    );
    t.equal(
      deliveryOfUnsubscribeMailto(
        key,
        'bounces.example.com',
        unsubscribeMailtoFor(key, 'bounces.example.com', id),
      ),
      id,
    );
  },
);

t.test('the store: upserts, downgrades, paging, opt-in and lapsed entries', async (t) => {
  const engines = await startTestEngines(t);
  const db = createPool(engines.databaseUrl, { max: 4 });
  t.teardown(() => db.end());
  await migrate(db);
  const clients = new ClientStore(db, new SecretBox(randomBytes(32)));
  const { client_id: clientId } = await clients.create('consent', false);
  const tenants = new TenantStore(db);
  await tenants.create(clientId, { tenant: 'acme', settings: { sender_id: '+15550001000' } });
  await tenants.create(clientId, { tenant: 'beta' });
  const s = new SuppressionStore(db, { softBounceHoldMs: 3_600_000 });

  // The channel table is the one list of channels: no constraint writes it out again, so adding a
  // channel needs no migration (issue 24; migration 010 had a CHECK, dropped by 016).
  const { rows: channelChecks } = await db.query(
    `SELECT conname FROM pg_constraint WHERE conrelid = 'suppressions'::regclass AND contype = 'c'
      AND pg_get_constraintdef(oid) LIKE '%channel%'`,
  );
  t.same(channelChecks, [], 'no CHECK on the suppression list repeats the channel table');

  const first = await s.upsert(clientId, [
    {
      tenant: 'acme',
      channel: 'email',
      address: 'Ann@Example.com',
      reason: 'hard_bounce',
      source: 'bounce_mail',
      detail: '550 5.1.1 no such user',
    },
  ]);
  t.equal(first.created, 1);
  t.equal(first.entries[0]!.address, 'ann@example.com');
  t.equal(first.entries[0]!.expires_at, null);

  const soft = await s.upsert(clientId, [
    {
      tenant: 'acme',
      channel: 'email',
      address: 'ann@example.com',
      reason: 'soft_bounce',
      source: 'bounce_mail',
    },
  ]);
  t.equal(soft.entries.length, 0, 'a soft bounce does not downgrade a hard bounce');
  const kept = await s.list(clientId, 'acme', { channel: 'email', address: 'ANN@example.com' });
  t.equal(kept.results[0]!.reason, 'hard_bounce');

  const softNew = await s.upsert(clientId, [
    {
      tenant: 'acme',
      channel: 'email',
      address: 'bo@example.com',
      reason: 'soft_bounce',
      source: 'bounce_mail',
    },
  ]);
  const holds = Date.parse(softNew.entries[0]!.expires_at!) - Date.now();
  t.ok(holds > 3_500_000 && holds <= 3_600_000, 'a soft bounce holds for the configured time');

  t.throws(
    () =>
      s.normalise({
        tenant: 'acme',
        channel: 'sms',
        address: 'not a number',
        reason: 'manual',
        source: 'api',
      }),
    { code: 'ENS_ERR_VALIDATION' },
  );
  const long = await s.upsert(clientId, [
    {
      tenant: 'acme',
      channel: 'sms',
      address: '+15551110001',
      reason: 'manual',
      source: 'api',
      detail: 'x'.repeat(5000),
    },
  ]);
  t.equal(long.entries[0]!.detail!.length, 1000, 'evidence is bounded');
  const nul = await s.upsert(clientId, [
    {
      tenant: 'acme',
      channel: 'sms',
      address: '+15551110002',
      reason: 'manual',
      source: 'api',
      detail: 'a\u0000b\nc',
    },
  ]);
  t.equal(
    nul.entries[0]!.detail,
    'a b\nc',
    'a NUL is blanked, not refused by PostgreSQL; a line break stays',
  );

  // Paging: 2,500 entries in pages of 1,000, each seen once.
  const many = Array.from({ length: 2500 }, (_, i) => ({
    tenant: 'beta',
    channel: 'sms' as const,
    address: `+1555200${String(i).padStart(4, '0')}`,
    reason: 'manual' as const,
    source: 'import' as const,
  }));
  t.equal((await s.upsert(clientId, many)).created, 2500);
  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await s.list(clientId, 'beta', { limit: 1000, ...(cursor ? { cursor } : {}) });
    seen.push(...page.results.map((e) => e.address));
    cursor = page.next_cursor ?? undefined;
    pages++;
  } while (cursor);
  t.equal(pages, 3);
  t.equal(new Set(seen).size, 2500);
  await t.rejects(s.list(clientId, 'beta', { cursor: 'bogus' }), { code: 'ENS_ERR_VALIDATION' });

  // An SMS STOP to the tenant's sender, then START: opt-outs lifted, a bounce left standing.
  const stop = await s.reportForAddress({
    kind: 'opt_out',
    provider: 'twilio',
    channel: 'sms',
    address: '15553334444',
    sender: { id: '15550001000', isDefault: false },
    detail: 'STOP',
  });
  t.equal(stop.entries, 1, 'only the tenant sending from that number');
  const none = await s.reportForAddress({
    kind: 'opt_out',
    provider: 'twilio',
    channel: 'sms',
    address: '15553334444',
    sender: { id: '+15559999999', isDefault: false },
    detail: 'STOP',
  });
  t.equal(none.entries, 0, 'a STOP to a number no tenant sends from');
  const byDefault = await s.reportForAddress({
    kind: 'opt_out',
    provider: 'twilio',
    channel: 'sms',
    address: '15553334444',
    sender: { id: '+15559999999', isDefault: true },
    detail: 'STOP',
  });
  t.equal(byDefault.entries, 1, 'the default sender covers the tenants without one of their own');
  await s.upsert(clientId, [
    {
      tenant: 'acme',
      channel: 'sms',
      address: '+15553334444',
      scope: 'x.y',
      reason: 'hard_bounce',
      source: 'provider',
    },
  ]);
  const start = await s.reportForAddress({
    kind: 'opt_in',
    provider: 'twilio',
    channel: 'sms',
    address: '+15553334444',
    sender: { id: '+15550001000', isDefault: false },
    detail: 'START',
  });
  t.equal(start.entries, 1);
  t.same(
    (await s.list(clientId, 'acme', { channel: 'sms', address: '+15553334444' })).results.map(
      (e) => e.reason,
    ),
    ['hard_bounce'],
  );

  // Lapsed soft bounces go.
  await db.query(
    `UPDATE suppressions SET expires_at = now() - interval '1 second' WHERE address = 'bo@example.com'`,
  );
  t.equal(await s.purgeLapsed(), 1);
  t.equal(await s.purgeLapsed(), 0);

  // Policy.
  t.same(await s.policy(clientId), {
    suppression_reasons: [
      'hard_bounce',
      'soft_bounce',
      'complaint',
      'opt_out',
      'invalid_recipient',
      'manual',
    ],
    bulk_event_types: [],
    must_deliver_event_types: [],
  });
  t.same((await s.setPolicy(clientId, { bulk_event_types: ['news', 'news'] }))!.bulk_event_types, [
    'news',
  ]);
  await t.rejects(s.setPolicy(clientId, { suppression_reasons: ['bogus' as never] }), {
    code: 'ENS_ERR_BAD_REQUEST',
  });
  t.equal(await s.setPolicy('no-such-client', { bulk_event_types: [] }), null);

  // The send path's look-up and the list both use the primary key on a large list.
  await db.query(
    `INSERT INTO suppressions (client_id, tenant, channel, address, reason, source)
                  SELECT $1, 'beta', 'email', 'u' || g || '@example.com', 'manual', 'import' FROM generate_series(1, 100000) g`,
    [clientId],
  );
  await db.query('ANALYZE suppressions');
  const plan = (
    await db.query(
      `EXPLAIN SELECT 1 FROM suppressions WHERE client_id = $1 AND tenant = 'beta' AND channel = 'email' AND address = 'u5@example.com' AND scope IN ('*', 'news')`,
      [clientId],
    )
  ).rows
    .map((r) => r['QUERY PLAN'])
    .join('\n');
  t.match(plan, /Index (Only )?Scan using suppressions_pkey/);
});

t.test("a tenant's list goes with the tenant", async (t) => {
  const engines = await startTestEngines(t);
  const db = createPool(engines.databaseUrl, { max: 2 });
  t.teardown(() => db.end());
  await migrate(db);
  const { client_id: clientId } = await new ClientStore(db, new SecretBox(randomBytes(32))).create(
    'consent',
    false,
  );
  const tenants = new TenantStore(db);
  await tenants.create(clientId, { tenant: 'gone' });
  const s = new SuppressionStore(db, { softBounceHoldMs: 1000 });
  await s.upsert(clientId, [
    { tenant: 'gone', channel: 'sms', address: '+15551230001', reason: 'manual', source: 'api' },
  ]);
  t.equal(await tenants.delete(clientId, 'gone'), 'deleted');
  await tenants.create(clientId, { tenant: 'gone' });
  t.same(
    (await s.list(clientId, 'gone', {})).results,
    [],
    'a tenant made again with the same id starts with an empty list',
  );
  await t.rejects(
    s.upsert(clientId, [
      { tenant: 'never', channel: 'sms', address: '+15551230001', reason: 'manual', source: 'api' },
    ]),
    { code: '23503' },
    'no entry for a tenant that does not exist',
  );
});
