import t from 'tap';
import { createHmac } from 'node:crypto';
import { startRoles } from '@ens/app/roles';
import { startReceiver } from '../harness/receiver.ts';
import {
  smsHandoff,
  startTestService,
  waitFor,
  type TestClient,
  type TestService,
} from '../harness/service.ts';

/*
 * Consent on the send path (DESIGN invariant 8): once a suppression is committed, no delivery in
 * its scope is handed to a provider, including ones accepted before it. A provider call always
 * leaves an attempts row (the claim writes it before the call), so "no attempts row" is "no call".
 */

const attemptRows = async (svc: TestService, deliveryId: string) =>
  Number(
    (
      await svc.rt.db.query('SELECT count(*)::int AS n FROM attempts WHERE delivery_id = $1', [
        deliveryId,
      ])
    ).rows[0].n,
  );

async function ended(
  svc: TestService,
  client: TestClient,
  ids: string[],
): Promise<Map<string, any>> {
  return waitFor(
    async () => {
      const rows = new Map((await svc.feed(client)).map((r) => [r.delivery_id, r]));
      return ids.every((id) => rows.get(id) && rows.get(id).status !== 'pending')
        ? rows
        : undefined;
    },
    15_000,
    'every delivery ended',
  );
}

function newsletter(
  tenant: string,
  eventType = 'newsletter.weekly',
  extra: Record<string, unknown> = {},
) {
  return {
    tenant,
    event_type: eventType,
    messages: [
      {
        channel: 'email',
        recipients: ['Fail@Example.com'],
        content: { kind: 'rendered', subject: 'This week', body: 'News' },
      },
      { channel: 'sms', recipients: ['+15551230000'], content: { kind: 'rendered', body: 'News' } },
    ],
    ...extra,
  };
}

t.test(
  'an address the provider refused for good is not sent to again: the second newsletter fails ' +
    'suppressed without a provider call, and its callback is posted',
  async (t) => {
    const svc = await startTestService(t);
    const client = await svc.createClient();
    await svc.tenant(client, 'acme');
    const receiver = await startReceiver(t);

    const first = await svc.send(
      client,
      newsletter('acme', 'newsletter.weekly', { callback_url: receiver.url }),
    );
    t.equal(first.status, 202);
    const firstIds = first.body.deliveries.map((d: any) => d.delivery_id);
    const rows1 = await ended(svc, client, firstIds);
    for (const id of firstIds) {
      t.equal(rows1.get(id).status, 'failed');
      t.equal(rows1.get(id).attempts, 1, 'the first send went to the provider');
      t.match(rows1.get(id).last_error, /sandbox: .* is set up to fail/);
    }
    const entries = await svc.rt.suppressions.list(client.clientId, 'acme', {});
    t.same(entries.results.map((e) => [e.channel, e.address, e.reason, e.source, e.scope]).sort(), [
      ['email', 'fail@example.com', 'invalid_recipient', 'provider', '*'],
      ['sms', '+15551230000', 'invalid_recipient', 'provider', '*'],
    ]);
    t.ok(
      entries.results.every(
        (e) =>
          e.provider === 'sandbox' &&
          /set up to fail/.test(e.detail ?? '') &&
          firstIds.includes(e.delivery_id),
      ),
      'the evidence is kept',
    );

    const second = await svc.send(
      client,
      newsletter('acme', 'newsletter.weekly', { callback_url: receiver.url }),
    );
    const secondIds: string[] = second.body.deliveries.map((d: any) => d.delivery_id);
    t.equal(second.status, 202, 'the accept is unchanged');
    t.equal(second.body.status, 'pending');
    const rows2 = await ended(svc, client, secondIds);
    for (const id of secondIds) {
      const r = rows2.get(id);
      t.equal(r.status, 'failed');
      t.equal(r.attempts, 0, 'no attempt was made');
      t.match(
        r.last_error,
        /^suppressed: .* is on the suppression list \(invalid_recipient, provider\) since \d{4}-\d\d-\d\dT/,
      );
      t.equal(await attemptRows(svc, id), 0, 'no provider call');
    }
    const posts = await waitFor(
      async () => {
        const bodies = receiver.posts.map((p) => JSON.parse(p.raw.toString()));
        const mine = bodies.filter((b) => secondIds.includes(b.delivery_id));
        return mine.length === secondIds.length ? { bodies: mine, raw: receiver.posts } : undefined;
      },
      10_000,
      "the suppressed deliveries' callbacks",
    );
    for (const b of posts.bodies) {
      t.equal(b.status, 'failed');
      t.match(b.last_error, /^suppressed: /);
      t.equal(b.attempts, 0);
    }
    const post = posts.raw.find((p) =>
      secondIds.includes(JSON.parse(p.raw.toString()).delivery_id),
    )!;
    const secret = client.callbackSecret!;
    t.equal(
      post.headers['x-ens-signature'],
      createHmac('sha256', secret).update(post.raw).digest('hex'),
      'signed like any callback',
    );
  },
);

t.test(
  "a refusal's entry is committed before its delivery is failed: whoever sees the failure " +
    'finds the entry',
  async (t) => {
    const svc = await startTestService(t);
    const client = await svc.createClient();
    await svc.tenant(client, 'acme');
    // Inside the transaction that fails a delivery, note whether its entry is already visible.
    await svc.rt.db.query(`
      CREATE TABLE failed_seen (delivery_id uuid, entry_visible boolean);
      CREATE FUNCTION note_failed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO failed_seen SELECT NEW.id, EXISTS (SELECT 1 FROM suppressions WHERE delivery_id = NEW.id);
        RETURN NULL;
      END $$;
      CREATE TRIGGER note_failed AFTER UPDATE OF status ON deliveries FOR EACH ROW
        WHEN (NEW.status = 'failed' AND OLD.status <> 'failed') EXECUTE FUNCTION note_failed();`);
    t.teardown(() =>
      svc.rt.db.query(
        'DROP TRIGGER note_failed ON deliveries; DROP FUNCTION note_failed(); DROP TABLE failed_seen',
      ),
    );
    const r = await svc.send(client, newsletter('acme'));
    t.equal(r.status, 202);
    const ids: string[] = r.body.deliveries.map((d: any) => d.delivery_id);
    await ended(svc, client, ids);
    const { rows } = await svc.rt.db.query(
      'SELECT delivery_id::text AS id, entry_visible FROM failed_seen ORDER BY delivery_id',
    );
    t.same(
      rows,
      ids.toSorted().map((id) => ({ id, entry_visible: true })),
      'each delivery was failed after its entry was committed',
    );
  },
);

t.test('a suppression committed while deliveries are queued stops every one of them', async (t) => {
  // No worker yet: the deliveries are accepted and wait in their queue.
  const svc = await startTestService(t, { roles: ['api', 'callbacks', 'feed'] });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await svc.send(
      client,
      smsHandoff('acme', ['+15557770001', `+1555777${String(1000 + i)}`]),
    );
    t.equal(r.status, 202);
    ids.push(...r.body.deliveries.map((d: any) => d.delivery_id));
  }
  await svc.rt.suppressions.upsert(client.clientId, [
    {
      tenant: 'acme',
      channel: 'sms',
      address: '15557770001',
      reason: 'manual',
      source: 'api',
      detail: 'asked by phone',
    },
  ]);
  const worker = await startRoles(svc.rt, ['worker'], { port: 0, host: '127.0.0.1' });
  t.teardown(() => worker.stop());
  const rows = await ended(svc, client, ids);
  const toSuppressed = ids.filter((id) => rows.get(id).recipient === '+15557770001');
  t.equal(toSuppressed.length, 20);
  for (const id of toSuppressed) {
    t.equal(rows.get(id).status, 'failed');
    t.match(
      rows.get(id).last_error,
      /^suppressed: \+15557770001 is on the suppression list \(manual, api\) since .*: asked by phone$/,
    );
    t.equal(await attemptRows(svc, id), 0);
  }
  t.ok(
    ids.filter((id) => !toSuppressed.includes(id)).every((id) => rows.get(id).status === 'sent'),
    'other recipients of the same handoffs are sent',
  );
});

t.test(
  'a suppression committed while a worker is sending to the address: no send is claimed after ' +
    'the commit',
  async (t) => {
    const svc = await startTestService(t, {
      env: {
        ENS_WORKER_CONCURRENCY: '2',
        ENS_PROVIDER_CONFIG: JSON.stringify({
          '@ens/plugin-sandbox': { handsetDelayMs: 100, sendDelayMs: 40 },
        }),
      },
    });
    const client = await svc.createClient();
    await svc.tenant(client, 'acme');
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const r = await svc.send(client, smsHandoff('acme', ['+15558880001']));
      ids.push(r.body.deliveries[0].delivery_id);
    }
    // Some have been sent by now, most still queue behind the two slots.
    await waitFor(
      async () =>
        (
          await svc.rt.db.query(
            `SELECT count(*)::int AS n FROM deliveries WHERE status = 'sent' AND id = ANY($1::uuid[])`,
            [ids],
          )
        ).rows[0].n >= 3,
      10_000,
      'a few sends',
    );
    await svc.rt.suppressions.upsert(client.clientId, [
      { tenant: 'acme', channel: 'sms', address: '+15558880001', reason: 'opt_out', source: 'api' },
    ]);
    const committed = (await svc.rt.db.query('SELECT clock_timestamp() AS now')).rows[0]
      .now as Date;
    const rows = await ended(svc, client, ids);
    const late = await svc.rt.db.query(
      `SELECT count(*)::int AS n FROM attempts WHERE delivery_id = ANY($1::uuid[]) AND started_at > $2`,
      [ids, committed],
    );
    t.equal(late.rows[0].n, 0, 'no attempt started after the commit');
    const sent = ids.filter((id) => rows.get(id).status === 'sent').length;
    const suppressed = ids.filter((id) =>
      /^suppressed: /.test(rows.get(id).last_error ?? ''),
    ).length;
    t.ok(sent >= 3 && suppressed > 0, `${sent} sent before, ${suppressed} stopped after`);
    t.equal(
      sent + suppressed,
      ids.length,
      'every delivery either went before the commit or was stopped',
    );
  },
);

t.test('scope, policy and expiry decide which sends an entry stops', async (t) => {
  const svc = await startTestService(t);
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  await svc.tenant(client, 'other');
  const s = svc.rt.suppressions;
  const past = new Date(Date.now() - 60_000).toISOString();
  await s.upsert(client.clientId, [
    // an unsubscribe from one kind of mail
    {
      tenant: 'acme',
      channel: 'email',
      address: 'ann@example.com',
      scope: 'newsletter.weekly',
      reason: 'opt_out',
      source: 'unsubscribe',
    },
    // an email complaint, against every event type
    {
      tenant: 'acme',
      channel: 'email',
      address: 'bob@example.com',
      reason: 'complaint',
      source: 'complaint_mail',
    },
    // an sms STOP
    {
      tenant: 'acme',
      channel: 'sms',
      address: '+15554440001',
      reason: 'opt_out',
      source: 'provider',
    },
    // a soft bounce whose hold has lapsed
    {
      tenant: 'acme',
      channel: 'email',
      address: 'cy@example.com',
      reason: 'soft_bounce',
      source: 'bounce_mail',
      expiresAt: past,
    },
  ]);
  await s.setPolicy(client.clientId, { must_deliver_event_types: ['password.reset'] });

  const send = async (tenant: string, eventType: string, channel: 'email' | 'sms', to: string) => {
    const content =
      channel === 'email'
        ? { kind: 'rendered', subject: 's', body: 'b' }
        : { kind: 'rendered', body: 'b' };
    const r = await svc.send(client, {
      tenant,
      event_type: eventType,
      messages: [{ channel, recipients: [to], content }],
    });
    return r.body.deliveries[0].delivery_id as string;
  };
  const cases: [string, string, 'email' | 'sms', string, 'sent' | 'suppressed'][] = [
    ['acme', 'newsletter.weekly', 'email', 'ANN@example.com', 'suppressed'],
    ['acme', 'order.shipped', 'email', 'ann@example.com', 'sent'],
    ['acme', 'newsletter.weekly', 'email', 'bob@example.com', 'suppressed'],
    ['acme', 'password.reset', 'email', 'bob@example.com', 'sent'],
    ['acme', 'password.reset', 'sms', '+15554440001', 'suppressed'],
    ['acme', 'newsletter.weekly', 'email', 'cy@example.com', 'sent'],
    ['other', 'newsletter.weekly', 'email', 'bob@example.com', 'sent'],
  ];
  const ids: string[] = [];
  for (const [tenant, eventType, channel, to] of cases)
    ids.push(await send(tenant, eventType, channel, to));
  const rows = await ended(svc, client, ids);
  cases.forEach(([tenant, eventType, channel, to, want], i) => {
    const r = rows.get(ids[i]!);
    const got =
      r.status === 'sent'
        ? 'sent'
        : /^suppressed: /.test(r.last_error)
          ? 'suppressed'
          : `failed: ${r.last_error}`;
    t.equal(got, want, `${eventType} to ${to} (${channel}) in ${tenant}`);
  });

  // The operator turns complaints off for this client: bob's newsletter goes again.
  await s.setPolicy(client.clientId, {
    suppression_reasons: ['hard_bounce', 'soft_bounce', 'opt_out', 'invalid_recipient', 'manual'],
  });
  const again = await send('acme', 'newsletter.weekly', 'email', 'bob@example.com');
  t.equal(
    (await ended(svc, client, [again])).get(again).status,
    'sent',
    'a reason the policy does not enforce stops nothing',
  );
});
