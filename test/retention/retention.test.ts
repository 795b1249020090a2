import { randomBytes } from 'node:crypto';
import t from 'tap';
import { pino } from 'pino';
import { loadConfig, metricsRegistry } from '@ens/core';
import { removeExpiredRecords, retentionRound } from '@ens/core/internal';
import { startReceiver } from '../harness/receiver.ts';
import { startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/*
 * ENS_RETENTION: the sweeper removes whole handoffs older than the retention whose deliveries are
 * all final and whose callbacks are all delivered or dead, child rows first, in short batches. A
 * handoff with a pending delivery or a callback still to post stays whatever its age, and the feed
 * still walks what remains without skipping. The state here is made by the real roles (sandbox
 * sends, signed callbacks to a receiver, the whatsapp handset's reports, an inline image); only the
 * two "not final" cases are set by hand, as a stuck delivery and an undelivered callback.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function counter(name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = metricsRegistry.getSingleMetric(name);
  if (!metric) return Number.NaN;
  const values = (await metric.get()).values.filter((v) =>
    Object.entries(labels).every(([k, l]) => v.labels[k] === l),
  );
  return values.reduce((sum, v) => sum + v.value, 0);
}

/** A logger that keeps every record at debug and above. */
function recordingLogger() {
  const records: Record<string, any>[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void records.push(JSON.parse(line)) },
  );
  return { logger, records };
}

t.test(
  'ENS_RETENTION is a duration, 30 days unless set, and no shorter than ENS_IDEMPOTENCY_TTL',
  async (t) => {
    t.equal(loadConfig({}).retentionMs, 30 * 86_400_000);
    t.equal(loadConfig({ ENS_RETENTION: '90d' }).retentionMs, 90 * 86_400_000);
    t.throws(() => loadConfig({ ENS_RETENTION: 'a month' }), /ENS_RETENTION/);
    t.throws(
      () => loadConfig({ ENS_RETENTION: '12h' }),
      /ENS_RETENTION.*ENS_IDEMPOTENCY_TTL/,
      'a key would outlive the handoff it replays',
    );
    t.equal(
      loadConfig({ ENS_RETENTION: '12h', ENS_IDEMPOTENCY_TTL: '1h' }).retentionMs,
      12 * 3_600_000,
    );
  },
);

t.test(
  'old final handoffs go with every row of theirs; live ones stay whatever their age',
  async (t) => {
    const svc = await startTestService(t, { env: { ENS_CALLBACK_BACKOFF: '50ms' } });
    // Each callback's first post fails and its retry (the same bytes) succeeds: a successful post
    // is recorded in its callbacks row alone (migration 018), so the failed one is what gives each
    // callback a callback_attempts row to remove.
    const receiver = await startReceiver(t, (raw, before) =>
      before.some((p) => p.raw.equals(raw)) ? 200 : 500,
    );
    const client = await svc.createClient({ callbackSecret: true });
    await svc.tenant(client, 'acme');
    const { db } = svc.rt;

    const sms = (recipients: string[], extra: Record<string, unknown> = {}) => ({
      tenant: 'acme',
      event_type: 'retention.test',
      callback_url: receiver.url,
      messages: [{ channel: 'sms', recipients, content: { kind: 'rendered', body: 'hi' } }],
      ...extra,
    });
    const image = randomBytes(2048);
    const handoffs: Record<string, unknown> = {
      fanout: sms(['+15554000001', '+15554000002', '+15554000003']),
      whatsapp: {
        tenant: 'acme',
        event_type: 'retention.test',
        callback_url: receiver.url,
        messages: [
          {
            channel: 'whatsapp',
            recipients: ['+15554002222'],
            content: {
              kind: 'template',
              template_name: 'order_update',
              language: 'en',
              body_params: ['42'],
            },
          },
        ],
      },
      failed: sms(['+15550000000']),
      image: {
        tenant: 'acme',
        event_type: 'retention.test',
        messages: [
          {
            channel: 'email',
            recipients: ['a@example.com'],
            content: {
              kind: 'rendered',
              subject: 's',
              body: 'b',
              html: '<img src="cid:logo">',
              inline_images: [
                { cid: 'logo', media_type: 'image/png', data: image.toString('base64') },
              ],
            },
          },
        ],
      },
      stuck: sms(['+15554000010', '+15554000011']),
      unposted: sms(['+15554000020']),
      unstamped: sms(['+15554000030']),
    };
    // Handoffs of two deliveries then one, so a batch often ends with whole handoffs left over.
    for (let i = 0; i < 6; i++)
      handoffs[`plain${i}`] = sms(
        i % 2 === 0 ? [`+1555400010${i}`, `+1555400011${i}`] : [`+1555400010${i}`],
      );

    const ids = new Map<string, { handoff: string; deliveries: string[]; key: string }>();
    for (const [name, body] of Object.entries(handoffs)) {
      const key = uniqueKey(name);
      const r = await svc.send(client, body, key);
      t.equal(r.status, 202, `${name}: ${r.text}`);
      ids.set(name, {
        handoff: r.body.handoff_id,
        deliveries: r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id),
        key,
      });
    }
    const all = [...ids.values()];
    const allDeliveries = all.flatMap((h) => h.deliveries);
    t.ok(
      all.every((h) => typeof h.handoff === 'string'),
      'each 202 names its handoff',
    );

    // Everything ends: sent or failed, every callback posted, the whatsapp handset has read,
    // stamped.
    await waitFor(
      async () => {
        const { rows } = await db.query<{ busy: boolean }>(
          `SELECT EXISTS (SELECT FROM deliveries WHERE id = ANY ($1) AND (status = 'pending' OR stamp_pending))
           OR EXISTS (SELECT FROM callbacks WHERE delivery_id = ANY ($1) AND status = 'pending')
           OR NOT EXISTS (SELECT FROM delivery_events WHERE delivery_id = ANY ($1) AND kind = 'read') AS busy`,
          [allDeliveries],
        );
        return !rows[0]!.busy;
      },
      30_000,
      'every delivery and callback to end',
    );

    const childCounts = async (deliveries: string[]) => {
      const { rows } = await db.query<
        Record<
          | 'deliveries'
          | 'attempts'
          | 'delivery_events'
          | 'callbacks'
          | 'callback_attempts'
          | 'media_refs',
          number
        >
      >(
        `SELECT (SELECT count(*)::int FROM deliveries WHERE id = ANY ($1)) AS deliveries,
              (SELECT count(*)::int FROM attempts WHERE delivery_id = ANY ($1)) AS attempts,
              (SELECT count(*)::int FROM delivery_events WHERE delivery_id = ANY ($1)) AS delivery_events,
              (SELECT count(*)::int FROM callbacks WHERE delivery_id = ANY ($1)) AS callbacks,
              (SELECT count(*)::int FROM callback_attempts a JOIN callbacks c ON c.id = a.callback_id WHERE c.delivery_id = ANY ($1)) AS callback_attempts,
              (SELECT count(*)::int FROM media_refs WHERE delivery_id = ANY ($1)) AS media_refs`,
        [deliveries],
      );
      return rows[0]!;
    };
    const before = await childCounts(allDeliveries);
    t.ok(
      before.attempts > 0 &&
        before.delivery_events > 0 &&
        before.callbacks > 0 &&
        before.callback_attempts > 0 &&
        before.media_refs > 0,
      `the old handoffs have every kind of child row: ${JSON.stringify(before)}`,
    );

    // Three old handoffs that are not done: a delivery that will be tried again tomorrow, a
    // callback that has not been posted yet, and a final change the feed has not stamped yet (the
    // stamper passes over a row while a worker's lease on it runs).
    const stuck = ids.get('stuck')!;
    const unposted = ids.get('unposted')!;
    const unstamped = ids.get('unstamped')!;
    // A cursor taken before the removal, pointing into what will be removed. Taken before the
    // changes below: a read stamps its client's pending changes, leased ones too (the record shows
    // a delivery right after its 202), and the unstamped one must stay so for the removal.
    const firstPage = await client.call('GET', '/v2/deliveries?limit=2');
    t.equal(firstPage.status, 200);
    const oldCursor: string = firstPage.body.next_cursor;
    const oldStamp: string = firstPage.body.results[1].updated_at;
    await db.query(
      `UPDATE deliveries SET stamp_pending = true, lease_until = now() + interval '1 day', version = version + 1 WHERE id = $1`,
      [unstamped.deliveries[0]],
    );
    await db.query(
      `UPDATE deliveries SET status = 'pending', next_attempt_at = now() + interval '1 day', version = version + 1 WHERE id = $1`,
      [stuck.deliveries[0]],
    );
    await db.query(
      `UPDATE callbacks SET status = 'pending', next_attempt_at = now() + interval '1 day' WHERE delivery_id = $1`,
      [unposted.deliveries[0]],
    );

    // The cut: everything above is older than it, the handoff below is newer.
    await sleep(200);
    const cut = Date.now();
    await sleep(200);
    const fresh = await svc.send(client, sms(['+15554000200']), uniqueKey('fresh'));
    t.equal(fresh.status, 202);
    const freshDeliveries: string[] = fresh.body.deliveries.map(
      (d: { delivery_id: string }) => d.delivery_id,
    );
    await waitFor(
      async () =>
        (
          await db.query(`SELECT 1 FROM deliveries WHERE id = ANY ($1) AND NOT stamp_pending`, [
            freshDeliveries,
          ])
        ).rowCount === 1,
      10_000,
      'the fresh delivery to be stamped',
    );

    const removable = [...ids.entries()]
      .filter(([name]) => !['stuck', 'unposted', 'unstamped'].includes(name))
      .map(([, h]) => h);
    const removableDeliveries = removable.flatMap((h) => h.deliveries);
    const batchesBefore = await counter('ens_retention_batches_total');
    const removedBefore = await counter('ens_retention_removed_total', { table: 'deliveries' });
    const { logger, records } = recordingLogger();
    const round = await retentionRound(
      { db, logger },
      { retentionMs: Date.now() - cut, batchSize: 2 },
    );

    t.same(
      await childCounts(removableDeliveries),
      {
        deliveries: 0,
        attempts: 0,
        delivery_events: 0,
        callbacks: 0,
        callback_attempts: 0,
        media_refs: 0,
      },
      'the removed handoffs leave no delivery, attempt, provider event, callback, callback ' +
        'attempt or media reference',
    );
    t.equal(
      (
        await db.query('SELECT 1 FROM handoffs WHERE id = ANY ($1)', [
          removable.map((h) => h.handoff),
        ])
      ).rowCount,
      0,
      'nor their handoff rows',
    );
    t.equal(
      (
        await db.query('SELECT 1 FROM idempotency_keys WHERE client_id = $1 AND key = ANY ($2)', [
          client.clientId,
          removable.map((h) => h.key),
        ])
      ).rowCount,
      0,
      'nor their idempotency keys',
    );

    for (const [name, h] of [
      ['stuck', stuck],
      ['unposted', unposted],
      ['unstamped', unstamped],
    ] as const) {
      t.equal(
        (await db.query('SELECT 1 FROM handoffs WHERE id = $1', [h.handoff])).rowCount,
        1,
        `${name}: the handoff stays`,
      );
      t.equal(
        (await childCounts(h.deliveries)).deliveries,
        h.deliveries.length,
        `${name}: all its deliveries stay, the final ones too`,
      );
    }
    const unpostedRows = await childCounts(unposted.deliveries);
    t.ok(
      unpostedRows.attempts > 0 && unpostedRows.callbacks > 0 && unpostedRows.callback_attempts > 0,
      'the kept handoff keeps its child rows',
    );
    t.equal(
      (await childCounts(freshDeliveries)).deliveries,
      1,
      'a handoff newer than the retention stays',
    );

    // Bounded batches: each one removed at most batchSize deliveries, and the metrics count them.
    const batches = records.filter((r) => r.msg === 'retention batch');
    t.ok(
      batches.length >= Math.ceil(removableDeliveries.length / 2),
      `the removal took ${batches.length} batches for ${removableDeliveries.length} deliveries`,
    );
    t.ok(
      batches.every((b) => b.deliveries <= 2 && b.handoffs <= 2),
      `no batch went past 2 deliveries or handoffs: ${JSON.stringify(batches.map((b) => [b.handoffs, b.deliveries]))}`,
    );
    t.equal(
      batches.reduce((n, b) => n + b.deliveries, 0),
      removableDeliveries.length,
      'the batches add up to the deliveries removed',
    );
    t.equal(round.removed.deliveries, removableDeliveries.length);
    t.equal(round.removed.handoffs, removable.length);
    t.equal(round.batches, batches.length);
    t.equal(
      (await counter('ens_retention_batches_total')) - batchesBefore,
      batches.length,
      'ens_retention_batches_total counts the batches',
    );
    t.equal(
      (await counter('ens_retention_removed_total', { table: 'deliveries' })) - removedBefore,
      removableDeliveries.length,
      'ens_retention_removed_total counts the rows',
    );

    // A second round finds nothing while the three stay not done.
    t.equal(
      (await retentionRound({ db, logger }, { retentionMs: Date.now() - cut, batchSize: 2 }))
        .removed.deliveries,
      0,
      'nothing more to remove',
    );

    // The feed walks what remains, from the start and from a cursor into what was removed. The
    // walk's first page stamps the client's pending changes (the unstamped one too) before it
    // reads, so the order is read after it.
    const remainingIds = (
      await db.query<{ id: string }>('SELECT id::text FROM deliveries WHERE client_id = $1', [
        client.clientId,
      ])
    ).rows.map((r) => r.id);
    t.same(
      remainingIds.sort(),
      [
        ...stuck.deliveries,
        ...unposted.deliveries,
        ...unstamped.deliveries,
        ...freshDeliveries,
      ].sort(),
      'what remains',
    );
    const walked = await svc.feed(client);
    const remaining = (
      await db.query<{ id: string; u: string }>(
        `SELECT id::text, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') AS u FROM deliveries WHERE client_id = $1 ORDER BY updated_at`,
        [client.clientId],
      )
    ).rows;
    t.same(
      walked.map((r) => r.delivery_id),
      remaining.map((r) => r.id),
      'a walk from the start sees every remaining delivery, in order',
    );
    const fromOld: string[] = [];
    for (let url = `/v2/deliveries?limit=2&cursor=${encodeURIComponent(oldCursor)}`; ; ) {
      const r = await client.call('GET', url);
      t.equal(r.status, 200, 'a cursor older than the retention is still accepted');
      fromOld.push(...r.body.results.map((x: { delivery_id: string }) => x.delivery_id));
      if (!r.body.next_cursor) break;
      url = `/v2/deliveries?limit=2&cursor=${encodeURIComponent(r.body.next_cursor)}`;
    }
    t.same(
      fromOld,
      remaining.filter((r) => r.u > oldStamp).map((r) => r.id),
      'and continues with every remaining change after it',
    );

    // Once the stuck delivery ends, its handoff goes too, and so does the one the walk stamped.
    await db.query(`UPDATE deliveries SET status = 'failed', version = version + 1 WHERE id = $1`, [
      stuck.deliveries[0],
    ]);
    const later = await retentionRound(
      { db, logger },
      { retentionMs: Date.now() - cut, batchSize: 2 },
    );
    t.equal(
      later.removed.handoffs,
      2,
      'the handoff that has ended and the one now stamped are removed at the next round',
    );
    t.equal((await childCounts(stuck.deliveries)).deliveries, 0);
    t.equal(
      (await db.query('SELECT 1 FROM handoffs WHERE id = $1', [unposted.handoff])).rowCount,
      1,
      'the one with a callback to post still stays',
    );
  },
);

t.test('the sweeper job runs one round at a time and logs what a round removed', async (t) => {
  const svc = await startTestService(t, { roles: ['api'] });
  const { logger, records } = recordingLogger();
  const job = removeExpiredRecords({ db: svc.rt.db, logger }, { retentionMs: 86_400_000 });
  t.equal(job.name, 'retention');
  t.ok(job.everyMs <= 600_000, 'a round at least every ten minutes');
  await Promise.all([job.run(), job.run()]);
  t.equal(
    records.filter((r) => r.msg === 'retention round').length,
    1,
    'a pass that finds the previous one still running does nothing',
  );
});

t.test(
  'a batch never waits long for a row another transaction holds: the round ends and the next ' +
    'one removes it',
  async (t) => {
    const svc = await startTestService(t, { roles: ['api'] });
    const client = await svc.createClient();
    await svc.tenant(client, 'acme');
    const { db } = svc.rt;
    const r = await svc.send(client, {
      tenant: 'acme',
      event_type: 'lock.test',
      messages: [
        { channel: 'sms', recipients: ['+15554000300'], content: { kind: 'rendered', body: 'hi' } },
      ],
    });
    t.equal(r.status, 202, r.text);
    const id: string = r.body.deliveries[0].delivery_id;
    // Ended and stamped, as the worker and the feed role would leave it.
    await db.query(
      `UPDATE deliveries SET status = 'sent', stamp_pending = false, updated_at = clock_timestamp(), version = version + 1 WHERE id = $1`,
      [id],
    );
    await sleep(20);

    const holder = await db.connect();
    t.teardown(() => holder.release());
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM deliveries WHERE id = $1 FOR UPDATE', [id]);
    const { logger } = recordingLogger();
    const t0 = Date.now();
    const blocked = await retentionRound({ db, logger }, { retentionMs: 0 });
    t.ok(Date.now() - t0 < 10_000, `the round gave up after ${Date.now() - t0} ms`);
    t.equal(blocked.done, false, 'and says it did not finish');
    t.equal(
      (await db.query('SELECT 1 FROM deliveries WHERE id = $1', [id])).rowCount,
      1,
      'the locked delivery is still there',
    );
    await holder.query('ROLLBACK');

    const next = await retentionRound({ db, logger }, { retentionMs: 0 });
    t.equal(next.removed.deliveries, 1, 'the next round removes it');
    t.equal(next.done, true);
  },
);
