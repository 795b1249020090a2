import t from 'tap';
import { acceptHandoff, newId, type AcceptInput, type AcceptOutcome } from '@ens/core';
import {
  startTestService,
  smsHandoff,
  uniqueKey,
  waitFor,
  type ApiResponse,
  type TestClient,
} from '../harness/service.ts';

/**
 * Accepts that arrive together are written together (one statement, one transaction); each one
 * must still get exactly the answer it would have had alone: created, replayed (byte for byte),
 * 422 for a reused key, 400 for a tenant that is not provisioned, 429 over a daily quota, and a
 * refused one stores nothing.
 */
t.test('concurrent accepts', async (t) => {
  const svc = await startTestService(t);
  const q = async (sql: string, params: unknown[] = []) =>
    (await svc.rt.db.query(sql, params)).rows;
  const stored = async (clientId: string) =>
    (
      await q(
        `SELECT (SELECT count(*)::int FROM handoffs WHERE client_id = $1) AS handoffs,
                (SELECT count(*)::int FROM deliveries WHERE client_id = $1) AS deliveries,
                (SELECT count(*)::int FROM idempotency_keys WHERE client_id = $1) AS keys`,
        [clientId],
      )
    )[0] as { handoffs: number; deliveries: number; keys: number };
  const keyStored = async (clientId: string, key: string) =>
    (await q('SELECT 1 FROM idempotency_keys WHERE client_id = $1 AND key = $2', [clientId, key]))
      .length === 1;

  t.test('50 concurrent sends from several clients each get the right answer', async (t) => {
    const a = await svc.createClient();
    const b = await svc.createClient();
    const quota = await svc.createClient();
    // The quota is set before the client's first request, so no API process has cached the client
    // without it (a later change reaches the cache by NOTIFY, a moment after it commits).
    t.ok(await svc.rt.clients.setLimits(quota.clientId, { dailyQuota: { sms: 3 } }));
    for (const c of [a, b, quota]) await svc.tenant(c, 'acme');
    t.equal(
      (await svc.send(quota, smsHandoff('acme', ['+15551250001', '+15551250002']))).status,
      202,
      'two of three sms used before the burst',
    );

    // Earlier sends that the burst replays.
    const earlier: {
      client: TestClient;
      key: string;
      body: Record<string, unknown>;
      first: ApiResponse;
    }[] = [];
    for (const [i, c] of [a, a, b, b].entries()) {
      const key = uniqueKey('earlier');
      const body = smsHandoff('acme', [`+1555126000${i}`]);
      const first = await svc.send(c, body, key);
      t.equal(first.status, 202);
      earlier.push({ client: c, key, body, first });
    }
    const before = {
      a: await stored(a.clientId),
      b: await stored(b.clientId),
      quota: await stored(quota.clientId),
    };

    type Expect = 'created' | 'replay' | 'reused' | 'tenant' | 'quota' | 'one of a pair';
    const sends: {
      client: TestClient;
      key: string;
      body: Record<string, unknown>;
      expect: Expect;
      same?: ApiResponse;
    }[] = [];
    // 36 new handoffs from two clients.
    for (let i = 0; i < 36; i++) {
      sends.push({
        client: i % 2 ? a : b,
        key: uniqueKey('new'),
        body: smsHandoff('acme', [`+1555127${String(i).padStart(4, '0')}`]),
        expect: 'created',
      });
    }
    // 4 replays of earlier sends and 1 reuse of an earlier key with another body.
    for (const e of earlier)
      sends.push({ client: e.client, key: e.key, body: e.body, expect: 'replay', same: e.first });
    sends.push({
      client: a,
      key: earlier[0]!.key,
      body: smsHandoff('acme', ['+15551269999']),
      expect: 'reused',
    });
    // A tenant that is not provisioned.
    const badTenantKey = uniqueKey('bad-tenant');
    sends.push({
      client: b,
      key: badTenantKey,
      body: smsHandoff('globex', ['+15551260100']),
      expect: 'tenant',
    });
    // The quota client: one sms fits (3 of 3), two more would not.
    sends.push({
      client: quota,
      key: uniqueKey('fits'),
      body: smsHandoff('acme', ['+15551260200']),
      expect: 'created',
    });
    const overKey = uniqueKey('over');
    sends.push({
      client: quota,
      key: overKey,
      body: smsHandoff('acme', ['+15551260201', '+15551260202']),
      expect: 'quota',
    });
    // Two new sends with one key and one body (one creates, the other replays it), three times
    // over.
    for (let i = 0; i < 3; i++) {
      const key = uniqueKey('twin');
      const body = smsHandoff('acme', [`+155512610${i}0`]);
      sends.push(
        { client: a, key, body, expect: 'one of a pair' },
        { client: a, key, body, expect: 'one of a pair' },
      );
    }
    t.equal(sends.length, 50);

    // Hold back the first batches (a lock that their handoff inserts wait for) until every send has
    // arrived, so that the others queue and are written together: items of several clients, valid
    // and refused ones, in one batch.
    const holder = await svc.rt.db.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE handoffs IN SHARE MODE');
    const answers = Promise.all(sends.map((s) => svc.send(s.client, s.body, s.key)));
    try {
      await waitFor(
        async () =>
          (
            await q(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%ens_accept_batch%'`,
            )
          )[0].n >= 4,
        10_000,
        'every batch slot to be waiting',
      );
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    const replies = await answers;

    let created = { a: 0, b: 0, quota: 0 };
    const count = (c: TestClient) =>
      (c === a ? 'a' : c === b ? 'b' : 'quota') as keyof typeof created;
    for (const [i, s] of sends.entries()) {
      const r = replies[i]!;
      const name = `send ${i} (${s.expect})`;
      if (s.expect === 'created') {
        t.equal(r.status, 202, name);
        t.equal(r.headers.get('idempotent-replayed'), null, `${name}: not a replay`);
        t.same(
          r.body.deliveries.map((d: { recipient: string }) => d.recipient),
          (s.body.messages as { recipients: string[] }[])[0]!.recipients,
          `${name}: its own deliveries`,
        );
        created[count(s.client)]++;
      } else if (s.expect === 'replay') {
        t.equal(r.status, 202, name);
        t.equal(r.text, s.same!.text, `${name}: the original body byte for byte`);
        t.equal(r.headers.get('idempotent-replayed'), 'true', name);
      } else if (s.expect === 'reused') {
        t.equal(r.status, 422, name);
        t.equal(r.body.code, 'ENS_ERR_IDEMPOTENCY_KEY_REUSED', name);
      } else if (s.expect === 'tenant') {
        t.equal(r.status, 400, name);
        t.equal(r.body.code, 'ENS_ERR_TENANT_NOT_PROVISIONED', name);
        t.match(r.body.detail, /"globex"/, name);
      } else if (s.expect === 'quota') {
        t.equal(r.status, 429, name);
        t.equal(r.body.code, 'ENS_ERR_QUOTA_EXCEEDED', name);
        t.match(r.body.detail, /\bsms\b/, name);
        t.ok(Number(r.headers.get('retry-after')) >= 1, `${name}: Retry-After`);
      }
    }
    for (let i = 0; i < sends.length; i++) {
      if (sends[i]!.expect !== 'one of a pair' || sends[i - 1]?.key === sends[i]!.key) continue;
      const [x, y] = [replies[i]!, replies[i + 1]!];
      t.same([x.status, y.status], [202, 202], 'both twins answered 202');
      t.equal(x.text, y.text, 'with the same body');
      t.same(
        [x.headers.get('idempotent-replayed'), y.headers.get('idempotent-replayed')].sort(),
        ['true', null].sort(),
        'one created, the other replayed',
      );
      created.a++;
    }

    const after = {
      a: await stored(a.clientId),
      b: await stored(b.clientId),
      quota: await stored(quota.clientId),
    };
    for (const c of ['a', 'b', 'quota'] as const) {
      t.same(
        after[c],
        {
          handoffs: before[c].handoffs + created[c],
          deliveries: before[c].deliveries + created[c],
          keys: before[c].keys + created[c],
        },
        `client ${c}: one handoff, one delivery and one key per created send, nothing else`,
      );
    }
    t.same(
      await svc.rt.clients.usageToday(quota.clientId),
      { sms: 3 },
      'the quota client used exactly its quota',
    );
    const ids = replies
      .filter((r) => r.status === 202 && r.headers.get('idempotent-replayed') === null)
      .map((r) => r.body.handoff_id as string);
    const txs = (
      await q(
        'SELECT count(DISTINCT xmin::text)::int AS n FROM handoffs WHERE id = ANY($1::uuid[])',
        [ids],
      )
    )[0].n as number;
    t.ok(txs <= 10, `the ${ids.length} handoffs were written together, in ${txs} transactions`);
    t.notOk(await keyStored(b.clientId, badTenantKey), "the bad tenant's key was not kept");
    t.notOk(await keyStored(quota.clientId, overKey), "the refused send's key was not kept");
    created = { a: 0, b: 0, quota: 0 };
  });

  t.test('one batch: every item keeps its own outcome', async (t) => {
    const c = await svc.createClient();
    await svc.tenant(c, 'acme');
    t.ok(await svc.rt.clients.setLimits(c.clientId, { dailyQuota: { email: 2 } }));
    const input = (
      key: string,
      o: {
        tenant?: string;
        recipient?: string;
        eventType?: string;
        channel?: 'sms' | 'email';
        n?: number;
      } = {},
    ): AcceptInput => {
      const handoffId = newId();
      const channel = o.channel ?? 'sms';
      const deliveries = Array.from({ length: o.n ?? 1 }, (_, i) => ({
        id: newId(),
        channel,
        recipient: `${o.recipient ?? '+1555128'}${i}`,
      }));
      return {
        clientId: c.clientId,
        idempotencyKey: key,
        requestHash: JSON.stringify([o.tenant, o.recipient, o.eventType, channel, o.n]),
        handoffId,
        responseBody: JSON.stringify({ handoff_id: handoffId }),
        tenant: o.tenant ?? 'acme',
        eventType: o.eventType ?? 'e',
        reference: null,
        callbackUrl: null,
        messages: { [channel]: { kind: 'rendered', body: 'hi' } },
        deliveries,
        quota: (ch) => (ch === 'email' ? 2 : 0),
      };
    };
    const k = (name: string) => uniqueKey(name);
    const dup = k('dup');
    const reused = k('reused');
    const refusedThenValid = k('refused-then-valid');
    const items: [string, AcceptInput][] = [
      ['created', input(k('plain'))],
      ['created (first of two)', input(dup)],
      ['replay of the first', input(dup)],
      ['created (first of a reused key)', input(reused)],
      ['422: the same key with another body', input(reused, { recipient: '+1555129' })],
      ['400: tenant not provisioned', input(refusedThenValid, { tenant: 'globex' })],
      [
        'created: the key of a refused item is free again',
        input(refusedThenValid, { recipient: '+1555130' }),
      ],
      [
        'created: 2 email of a quota of 2',
        input(k('email-fits'), { channel: 'email', recipient: 'a', n: 2 }),
      ],
      ['429: one email more', input(k('email-over'), { channel: 'email', recipient: 'b' })],
    ];
    const before = await stored(c.clientId);
    /** Called in one tick, the items go as one batch. */
    const batch = async (list: [string, AcceptInput][]) => {
      const settled = await Promise.allSettled(list.map(([, a]) => acceptHandoff(svc.rt.db, a)));
      const names = list.map(([name], i) => {
        const s = settled[i]!;
        return `${name}: ${s.status === 'rejected' ? ((s.reason as { code?: string }).code ?? 'error') : s.value.outcome}`;
      });
      return { settled, names };
    };
    const { settled, names } = await batch(items);
    t.same(names, [
      'created: created',
      'created (first of two): created',
      'replay of the first: replay',
      'created (first of a reused key): created',
      '422: the same key with another body: ENS_ERR_IDEMPOTENCY_KEY_REUSED',
      '400: tenant not provisioned: ENS_ERR_TENANT_NOT_PROVISIONED',
      'created: the key of a refused item is free again: created',
      'created: 2 email of a quota of 2: created',
      '429: one email more: ENS_ERR_QUOTA_EXCEEDED',
    ]);
    const replay = settled[2] as PromiseFulfilledResult<AcceptOutcome>;
    t.equal(
      replay.value.responseBody,
      items[1]![1].responseBody,
      "the replay answers the first item's response",
    );
    const ids = settled.flatMap((x, i) =>
      x.status === 'fulfilled' && x.value.outcome === 'created' ? [items[i]![1].handoffId] : [],
    );
    const txs = (
      await q(
        'SELECT count(DISTINCT xmin::text)::int AS n FROM handoffs WHERE id = ANY($1::uuid[])',
        [ids],
      )
    )[0].n;
    t.equal(
      txs,
      2,
      'one transaction for the batch, one more for the item whose key was freed by a refused one',
    );
    t.same(
      await stored(c.clientId),
      { handoffs: before.handoffs + 5, deliveries: before.deliveries + 6, keys: before.keys + 5 },
      'five handoffs stored, nothing for the others',
    );

    // A batch that PostgreSQL refuses as a whole is redone item by item: only the bad one fails.
    const second = await batch([
      ['created before the failing one', input(k('before'))],
      [
        'a value PostgreSQL refuses (500) fails alone',
        input(k('nul'), { eventType: 'bad\u0000byte' }),
      ],
      ['created after the failing one', input(k('after'))],
    ]);
    t.same(second.names, [
      'created before the failing one: created',
      'a value PostgreSQL refuses (500) fails alone: 22021',
      'created after the failing one: created',
    ]);
    t.same(await stored(c.clientId), {
      handoffs: before.handoffs + 7,
      deliveries: before.deliveries + 8,
      keys: before.keys + 7,
    });
    t.same(await svc.rt.clients.usageToday(c.clientId), { sms: 6, email: 2 });
  });

  t.test('/metrics shows the batches: handoffs per statement and its time', async (t) => {
    const c = await svc.createClient();
    await svc.tenant(c, 'acme');
    /** The sum and count of a histogram on /metrics. */
    const histogram = async (name: string) => {
      const text = (await svc.request('GET', '/metrics')).text;
      const read = (part: string) => {
        const m = new RegExp(`^${name}_${part} ([0-9.e+-]+)$`, 'm').exec(text);
        return m ? Number(m[1]) : Number.NaN;
      };
      return { sum: read('sum'), count: read('count') };
    };
    const handoffs0 = await histogram('ens_accept_batch_handoffs');
    const duration0 = await histogram('ens_accept_batch_duration_seconds');
    const sent = await Promise.all(
      Array.from({ length: 6 }, (_, i) => svc.send(c, smsHandoff('acme', [`+155513100${i}`]))),
    );
    t.same(
      sent.map((r) => r.status),
      [202, 202, 202, 202, 202, 202],
    );
    const handoffs1 = await histogram('ens_accept_batch_handoffs');
    const duration1 = await histogram('ens_accept_batch_duration_seconds');
    const batches = handoffs1.count - handoffs0.count;
    t.equal(handoffs1.sum - handoffs0.sum, 6, 'the six handoffs were counted, once each');
    t.ok(batches >= 1 && batches <= 6, `in ${batches} statements`);
    t.equal(duration1.count - duration0.count, batches, 'each statement was timed');
    t.ok(duration1.sum > duration0.sum, 'and took some time');
  });
});
