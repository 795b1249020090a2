import t, { type Test } from 'tap';
import { runEns } from '../harness/ens-process.ts';
import { acceptHandoff, newId } from '@ens/core';
import type { Db } from '@ens/core/internal';
import {
  startTestService,
  smsHandoff,
  uniqueKey,
  waitFor,
  type ApiResponse,
  type TestClient,
} from '../harness/service.ts';

const SECONDS_PER_DAY = 86_400;

/** Per-client request rate limit on /v2/ and per-client daily quota per channel. */
t.test('client limits', async (t) => {
  const svc = await startTestService(t);

  const q = async (sql: string, params: unknown[] = []) =>
    (await svc.rt.db.query(sql, params)).rows;
  const state = async (clientId: string) =>
    (
      await q(
        `SELECT (SELECT count(*)::int FROM handoffs WHERE client_id = $1) AS handoffs,
                (SELECT count(*)::int FROM deliveries WHERE client_id = $1) AS deliveries,
                (SELECT count(*)::int FROM idempotency_keys WHERE client_id = $1) AS keys`,
        [clientId],
      )
    )[0];
  const burst = (c: TestClient, n: number) =>
    Promise.all(Array.from({ length: n }, () => c.call('GET', '/v2/tenants')));
  const tally = (rs: ApiResponse[]) => ({
    ok: rs.filter((r) => r.status === 200).length,
    limited: rs.filter((r) => r.status === 429).length,
  });

  const assertRateLimited = (t: Test, r: ApiResponse, perSecond: number) => {
    t.equal(r.status, 429);
    t.equal(r.body.code, 'ENS_ERR_RATE_LIMITED');
    t.match(
      r.body.detail,
      new RegExp(`${perSecond} requests per second`),
      'the detail gives the limit',
    );
    t.equal(r.headers.get('retry-after'), '1', 'Retry-After: 1 (second) for a per-second limit');
  };

  t.test('a per-client request rate limit set in the store', async (t) => {
    const limited = await svc.createClient();
    const bystander = await svc.createClient();
    // Set before the API first sees the client, so no cached row can be in the way.
    t.ok(await svc.rt.clients.setLimits(limited.clientId, { rateLimit: 2 }));
    await svc.tenant(limited, 'acme');
    // One second later the tenant call above has left the rate window.
    await new Promise((r) => setTimeout(r, 1100));

    const rs = await burst(limited, 10);
    const { ok, limited: n429 } = tally(rs);
    t.equal(ok + n429, 10, 'every answer is 200 or 429');
    // Two per one-second window; a slow machine may spread the burst over two windows.
    t.ok(
      ok >= 1 && ok <= 4,
      `at most two per second get through (${ok}); the rest, ${n429}, are refused`,
    );
    assertRateLimited(t, rs.find((r) => r.status === 429)!, 2);

    t.same(
      tally(await burst(bystander, 10)),
      { ok: 10, limited: 0 },
      'another client is not affected',
    );

    await new Promise((r) => setTimeout(r, 1100));
    t.equal(
      (await limited.call('GET', '/v2/tenants')).status,
      200,
      'after Retry-After the client is served again',
    );

    await new Promise((r) => setTimeout(r, 1100));
    const before = await state(limited.clientId);
    const sends = await Promise.all(
      Array.from({ length: 6 }, () =>
        svc.send(limited, smsHandoff('acme', ['+15551230001']), uniqueKey()),
      ),
    );
    const accepted = sends.filter((r) => r.status === 202).length;
    t.ok(
      sends.some((r) => r.status === 429),
      'sends are limited too',
    );
    const after = await state(limited.clientId);
    t.equal(after.handoffs - before.handoffs, accepted, 'a refused send stores nothing');
    t.equal(after.keys - before.keys, accepted);
  });

  t.test(
    'a per-client request rate limit set through the CLI applies to a client already in use',
    async (t) => {
      const c = await svc.createClient();
      t.same(tally(await burst(c, 10)), { ok: 10, limited: 0 }, 'no limit to speak of before');

      const set = await runEns(['clients', 'limits', c.clientId, '--rate', '2'], svc.env);
      t.equal(set.code, 0, set.stderr);
      t.equal(JSON.parse(set.stdout).rate_limit, 2, 'the CLI reports the new limit');
      // The API holds the client in its cache; the CLI's NOTIFY drops it there. Poll for a short
      // while.
      const rs = await waitFor(
        async () => {
          const rs = await burst(c, 10);
          return tally(rs).limited >= 1 ? rs : null;
        },
        3000,
        'the new rate limit to apply',
      );
      assertRateLimited(t, rs.find((r) => r.status === 429)!, 2);

      // Back to the default (the CLI's `--rate default` calls the same store method).
      t.ok(await svc.rt.clients.setLimits(c.clientId, { rateLimit: null }));
      await waitFor(
        async () => tally(await burst(c, 10)).ok === 10,
        3000,
        'the default limit to apply again',
      );
      t.pass('the default applies again');
    },
  );

  t.test('a daily quota per channel', async (t) => {
    const c = await svc.createClient();
    const other = await svc.createClient();
    t.ok(await svc.rt.clients.setLimits(c.clientId, { dailyQuota: { sms: 3 } }));
    await svc.tenant(c, 'acme');
    await svc.tenant(other, 'acme');
    const usage = () => svc.rt.clients.usageToday(c.clientId);

    const firstKey = uniqueKey('quota');
    const first = await svc.send(
      c,
      smsHandoff('acme', ['+15551230001', '15551230001', '+15551230002']),
      firstKey,
    );
    t.equal(first.status, 202, 'two sms deliveries (a repeated recipient counts once)');
    t.same(await usage(), { sms: 2 });

    const key = uniqueKey('over');
    const before = await state(c.clientId);
    const over = await svc.send(c, smsHandoff('acme', ['+15551230003', '+15551230004']), key);
    t.equal(over.status, 429, 'the send that would take sms to 4 of 3 is refused');
    t.equal(over.body.code, 'ENS_ERR_QUOTA_EXCEEDED');
    t.match(over.body.detail, /\bsms\b/, 'the detail names the channel');
    t.match(over.body.detail, /\b3\b/, 'and the quota');
    const retryAfter = Number(over.headers.get('retry-after'));
    t.ok(
      Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= SECONDS_PER_DAY,
      `Retry-After points at the next UTC day (${retryAfter} s)`,
    );
    t.same(await state(c.clientId), before, 'nothing stored');
    t.same(await usage(), { sms: 2 }, 'no usage counted for the refused send');

    const mixed = await svc.send(
      c,
      {
        ...smsHandoff('acme', ['+15551230003', '+15551230004']),
        messages: [
          {
            channel: 'sms',
            recipients: ['+15551230003', '+15551230004'],
            content: { kind: 'rendered', body: 'hi' },
          },
          {
            channel: 'email',
            recipients: ['ann@example.com'],
            content: { kind: 'rendered', body: 'hi' },
          },
        ],
      },
      uniqueKey(),
    );
    t.equal(mixed.status, 429, 'a handoff whose sms part is over quota is refused as a whole');
    t.same(await state(c.clientId), before, 'its email part is not stored either');

    const email = await svc.send(c, {
      tenant: 'acme',
      event_type: 'e',
      messages: [
        {
          channel: 'email',
          recipients: ['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com'],
          content: { kind: 'rendered', body: 'hi' },
        },
      ],
    });
    t.equal(email.status, 202, 'other channels are unaffected');

    const last = await svc.send(c, smsHandoff('acme', ['+15551230003']), key);
    t.equal(
      last.status,
      202,
      "one more sms fits exactly, under the refused request's Idempotency-Key",
    );
    t.equal(last.headers.get('idempotent-replayed'), null);
    t.same(await usage(), { sms: 3, email: 4 });

    const full = await svc.send(c, smsHandoff('acme', ['+15551230005']));
    t.equal(full.status, 429, 'the quota is used up');
    t.equal(full.body.code, 'ENS_ERR_QUOTA_EXCEEDED');

    const replay = await svc.send(
      c,
      smsHandoff('acme', ['+15551230001', '15551230001', '+15551230002']),
      firstKey,
    );
    t.equal(
      replay.status,
      202,
      'a replay is answered even with the quota used up: it sends nothing',
    );
    t.equal(replay.text, first.text);
    t.same(await usage(), { sms: 3, email: 4 });

    t.equal(
      (
        await svc.send(
          other,
          smsHandoff('acme', ['+15551230001', '+15551230002', '+15551230003', '+15551230004']),
        )
      ).status,
      202,
      'another client is not affected',
    );
  });

  t.test('a daily quota set through the CLI', async (t) => {
    const c = await svc.createClient();
    // Set before the API first sees the client: whether the API's cached client row is dropped on
    // a change is shown with the rate limit above, and waiting for it here could spend the quota.
    const set = await runEns(['clients', 'limits', c.clientId, '--daily-quota', 'sms=2'], svc.env);
    t.equal(set.code, 0, set.stderr);
    const shown = JSON.parse(set.stdout);
    t.equal(shown.daily_quota.sms, 2, 'the CLI reports the new quota');
    t.equal(
      shown.daily_quota.email,
      svc.config.dailyQuota,
      'and the default for the other channels',
    );
    t.same(shown.usage_today, {});

    await svc.tenant(c, 'acme');
    t.equal(
      (await svc.send(c, smsHandoff('acme', ['+15551230001']))).status,
      202,
      'the first sms of the day',
    );
    const over = await svc.send(c, smsHandoff('acme', ['+15551230002', '+15551230003']));
    t.equal(over.status, 429, 'two more would exceed the quota of 2');
    t.equal(over.body.code, 'ENS_ERR_QUOTA_EXCEEDED');
    t.equal(
      (await svc.send(c, smsHandoff('acme', ['+15551230002']))).status,
      202,
      'the second sms of the day fits',
    );
    t.equal(
      (await svc.send(c, smsHandoff('acme', ['+15551230003']))).status,
      429,
      'the third does not',
    );

    t.same(await svc.rt.clients.usageToday(c.clientId), { sms: 2 }, 'refused sends count no usage');

    // Back to the default (the CLI's `sms=default` calls the same store method).
    t.ok(await svc.rt.clients.setLimits(c.clientId, { dailyQuota: { sms: null } }));
    // A probe that is refused while the old quota is still cached changes nothing, so polling is
    // safe.
    await waitFor(
      async () => (await svc.send(c, smsHandoff('acme', ['+15551230003']))).status === 202,
      2000,
      'the default (unlimited) quota to apply',
    );
    t.pass('back to the default');
  });

  t.test(
    'a send that races another for the last unit of quota waits for it and is refused',
    async (t) => {
      const c = await svc.createClient();
      t.ok(await svc.rt.clients.setLimits(c.clientId, { dailyQuota: { sms: 1 } }));
      await svc.tenant(c, 'acme');
      // The first accept takes the last unit inside a transaction that stays open...
      const holder = await svc.rt.db.connect();
      t.teardown(() => holder.release());
      await holder.query('BEGIN');
      await acceptHandoff(holder as unknown as Db, {
        clientId: c.clientId,
        idempotencyKey: uniqueKey('held'),
        requestHash: 'h',
        responseBody: '{}',
        handoffId: newId(),
        tenant: 'acme',
        eventType: 'e',
        reference: null,
        callbackUrl: null,
        messages: {},
        deliveries: [{ id: newId(), channel: 'sms', recipient: '+15551243001' }],
        quota: () => 1,
      });
      // ...so a second send cannot see that usage yet. It must wait instead of slipping past the
      // check.
      let answered = false;
      const racing = svc.send(c, smsHandoff('acme', ['+15551243002'])).finally(() => {
        answered = true;
      });
      await new Promise((r) => setTimeout(r, 500));
      t.equal(answered, false, 'the racing send waits for the open transaction');
      await holder.query('COMMIT');
      const r = await racing;
      t.equal(r.status, 429, 'and is refused once the first commits');
      t.same(await svc.rt.clients.usageToday(c.clientId), { sms: 1 });
    },
  );
});
