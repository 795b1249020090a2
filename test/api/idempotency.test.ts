import t from 'tap';
import { startTestService, smsHandoff, uniqueKey, waitFor } from '../harness/service.ts';

/**
 * Idempotency per (client, Idempotency-Key): a replay answers the original 202 byte for byte and
 * sends nothing; a different body under the same key is 422; concurrent duplicates send once.
 */
t.test('Idempotency-Key', async (t) => {
  const svc = await startTestService(t);
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');

  const q = async (sql: string, params: unknown[] = []) =>
    (await svc.rt.db.query(sql, params)).rows;
  const state = async (clientId: string) =>
    (
      await q(
        `SELECT (SELECT count(*)::int FROM handoffs WHERE client_id = $1) AS handoffs,
                (SELECT count(*)::int FROM deliveries WHERE client_id = $1) AS deliveries,
                (SELECT count(*)::int FROM idempotency_keys WHERE client_id = $1) AS keys,
                (SELECT count(*)::int FROM attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.client_id = $1) AS attempts`,
        [clientId],
      )
    )[0];
  /** Resolves once every delivery of the handoff is sent or failed. */
  const settled = (handoffId: string) =>
    waitFor(
      async () =>
        (
          await q(
            `SELECT count(*)::int AS n FROM deliveries WHERE handoff_id = $1 AND status = 'pending'`,
            [handoffId],
          )
        )[0].n === 0,
      10_000,
      'deliveries to settle',
    );
  const sentAttempts = async (handoffId: string) =>
    q(
      `SELECT d.id::text AS id, count(a.*) FILTER (WHERE a.outcome = 'sent')::int AS sent FROM deliveries d
         LEFT JOIN attempts a ON a.delivery_id = d.id WHERE d.handoff_id = $1 GROUP BY d.id`,
      [handoffId],
    );
  /** Long enough for a stray wake-up to reach a worker and be sent (retries run at 100 ms). */
  const quietPeriod = () => new Promise((r) => setTimeout(r, 1000));

  t.test('a replay returns the original 202 body byte for byte and sends nothing', async (t) => {
    const key = uniqueKey('replay');
    const messages = [
      {
        channel: 'sms',
        recipients: ['+15551230001', '+15551230002'],
        content: { kind: 'rendered', body: 'hello' },
      },
    ];
    const body = { tenant: 'acme', event_type: 'test.event', reference: 'order-1', messages };
    const first = await svc.send(client, body, key);
    t.equal(first.status, 202);
    t.equal(
      first.headers.get('idempotent-replayed'),
      null,
      'the first answer is not marked as a replay',
    );
    await settled(first.body.handoff_id);
    const before = await state(client.clientId);

    const replay = await svc.send(client, body, key);
    t.equal(replay.status, 202);
    t.equal(replay.text, first.text, 'the same bytes');
    t.equal(
      replay.body.status,
      'pending',
      'the original answer, even though the deliveries have since been sent',
    );
    t.equal(replay.headers.get('idempotent-replayed'), 'true', 'marked as a replay');

    const reordered = await svc.send(
      client,
      {
        messages: [
          {
            content: { body: 'hello', kind: 'rendered' },
            recipients: messages[0]!.recipients,
            channel: 'sms',
          },
        ],
        reference: 'order-1',
        event_type: 'test.event',
        tenant: 'acme',
      },
      key,
    );
    t.equal(
      reordered.status,
      202,
      'the same JSON with its keys in another order is the same request',
    );
    t.equal(reordered.text, first.text);

    await quietPeriod();
    t.same(await state(client.clientId), before, 'no new handoff, delivery, key or attempt');
    for (const d of await sentAttempts(first.body.handoff_id))
      t.equal(d.sent, 1, `delivery ${d.id} sent once`);
  });

  t.test('the same key with a different body is 422 and stores nothing', async (t) => {
    const key = uniqueKey('reuse');
    const first = await svc.send(client, smsHandoff('acme', ['+15551230003']), key);
    t.equal(first.status, 202);
    await settled(first.body.handoff_id);
    const before = await state(client.clientId);
    for (const [name, other] of [
      ['another recipient', smsHandoff('acme', ['+15551230004'])],
      [
        'another event type',
        { ...smsHandoff('acme', ['+15551230003']), event_type: 'other.event' },
      ],
      ['a reference added', { ...smsHandoff('acme', ['+15551230003']), reference: 'r' }],
      ['the same number written differently', smsHandoff('acme', ['15551230003'])],
      ['another tenant that does not exist', smsHandoff('globex', ['+15551230003'])],
    ] as const) {
      const r = await svc.send(client, other, key);
      t.equal(r.status, 422, name);
      t.equal(r.body.code, 'ENS_ERR_IDEMPOTENCY_KEY_REUSED', name);
      t.type(r.body.detail, 'string');
    }
    t.same(await state(client.clientId), before, 'nothing stored, nothing sent');
    const replay = await svc.send(client, smsHandoff('acme', ['+15551230003']), key);
    t.equal(replay.status, 202, 'the original request still replays');
    t.equal(replay.text, first.text);
  });

  t.test('the same key from two clients makes two independent handoffs', async (t) => {
    const other = await svc.createClient();
    await svc.tenant(other, 'acme');
    const key = uniqueKey('shared');
    const body = smsHandoff('acme', ['+15551230005']);
    const a = await svc.send(client, body, key);
    const b = await svc.send(other, body, key);
    t.equal(a.status, 202);
    t.equal(b.status, 202);
    t.equal(b.headers.get('idempotent-replayed'), null, "the second client's send is not a replay");
    t.not(a.body.handoff_id, b.body.handoff_id);
    t.not(a.body.deliveries[0].delivery_id, b.body.deliveries[0].delivery_id);
    const owners = await q(
      'SELECT client_id FROM handoffs WHERE id = ANY($1::uuid[]) ORDER BY client_id',
      [[a.body.handoff_id, b.body.handoff_id]],
    );
    t.same(
      owners.map((r) => r.client_id).sort(),
      [client.clientId, other.clientId].sort(),
      'one handoff per client',
    );
    const bDifferent = await svc.send(other, smsHandoff('acme', ['+15551230006']), uniqueKey());
    t.equal(bDifferent.status, 202);
    await settled(a.body.handoff_id);
    await settled(b.body.handoff_id);
    t.equal(
      (await sentAttempts(a.body.handoff_id))[0]!.sent,
      1,
      "the first client's delivery is sent",
    );
    t.equal(
      (await sentAttempts(b.body.handoff_id))[0]!.sent,
      1,
      "the second client's delivery is sent",
    );
  });

  t.test(
    '20 concurrent requests with the same key and body: one handoff, each delivery sent once',
    async (t) => {
      const racer = await svc.createClient();
      await svc.tenant(racer, 'acme');
      const key = uniqueKey('race');
      const body = smsHandoff('acme', ['+15551230007', '+15551230008', '+15551231111']);
      const replies = await Promise.all(
        Array.from({ length: 20 }, () => svc.send(racer, body, key)),
      );
      const statuses = replies.map((r) => r.status);
      t.ok(
        statuses.every((s) => s === 202 || s === 409),
        `all 202 or 409: ${statuses.join(',')}`,
      );
      const accepted = replies.filter((r) => r.status === 202);
      t.ok(accepted.length >= 1, `${accepted.length} answered 202`);
      t.equal(new Set(accepted.map((r) => r.text)).size, 1, 'every 202 has the identical body');
      t.equal(
        accepted.filter((r) => r.headers.get('idempotent-replayed') === null).length,
        1,
        'exactly one of them created the handoff',
      );
      for (const r of replies.filter((r) => r.status === 409))
        t.equal(r.body.code, 'ENS_ERR_IDEMPOTENCY_IN_FLIGHT');
      const handoffId = accepted[0]!.body.handoff_id;

      const stored = await state(racer.clientId);
      t.equal(stored.handoffs, 1, 'exactly one handoff stored');
      t.equal(stored.deliveries, 3, 'its three deliveries');
      t.equal(stored.keys, 1);

      await settled(handoffId);
      await quietPeriod();
      const sent = await sentAttempts(handoffId);
      t.equal(sent.length, 3);
      for (const d of sent) t.equal(d.sent, 1, `delivery ${d.id} has exactly one sent attempt`);
      const statusesNow = await q(
        `SELECT status, attempts FROM deliveries WHERE handoff_id = $1 ORDER BY recipient`,
        [handoffId],
      );
      t.same(
        statusesNow.map((r) => r.status),
        ['sent', 'sent', 'sent'],
      );
      t.same(
        statusesNow.map((r) => r.attempts),
        [1, 1, 3],
        'the flaky number (ending 1111) took three attempts, the others one',
      );
    },
  );

  t.test(
    'concurrent requests with the same key and different bodies: exactly one wins',
    async (t) => {
      const racer = await svc.createClient();
      await svc.tenant(racer, 'acme');
      const key = uniqueKey('race-diff');
      const replies = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          svc.send(racer, smsHandoff('acme', [`+1555124${String(i).padStart(4, '0')}`]), key),
        ),
      );
      const statuses = replies.map((r) => r.status);
      t.equal(statuses.filter((s) => s === 202).length, 1, `one 202: ${statuses.join(',')}`);
      t.ok(
        statuses.every((s) => s === 202 || s === 422 || s === 409),
        'the others 422 (or 409 while the winner is in flight)',
      );
      const stored = await state(racer.clientId);
      t.equal(stored.handoffs, 1);
      t.equal(stored.deliveries, 1);
    },
  );
});
