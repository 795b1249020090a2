import t from 'tap';
import { DeliveryStore } from '@ens/core';
import { loadDelivery, providerOutcomes, type Db } from '@ens/core/internal';
import { migratedRecord, pendingSms } from '../../../test/harness/record-fixtures.ts';

/*
 * An attempt's row is written once, when the attempt ends (migration 017, issue 27): no row while
 * it is in flight (the open claim on the delivery row stands for it, in the console and the
 * dashboard), its outcome as one insert, and 'lost' for a claim that ended without one, written by
 * whatever transition found its lease run out.
 */

const CLIENT = 'attempt-rows';
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface AttemptRow {
  number: number;
  provider: string;
  outcome: string | null;
  error: string | null;
  started_at: Date;
}

async function attemptRows(db: Db, id: string): Promise<AttemptRow[]> {
  return (
    await db.query<AttemptRow>(
      'SELECT number, provider, outcome, error, started_at FROM attempts WHERE delivery_id = $1 ORDER BY number',
      [id],
    )
  ).rows;
}

async function claimedAt(db: Db, id: string): Promise<Date> {
  return (
    await db.query<{ at: Date }>('SELECT claimed_at AS at FROM deliveries WHERE id = $1', [id])
  ).rows[0]!.at;
}

t.test('an attempt in flight has no row; its end writes one, with its claim’s time', async (t) => {
  const db = await migratedRecord(t, CLIENT);
  const store = new DeliveryStore(db, {});
  const id = await pendingSms(db, CLIENT, '+15550000001');
  const claimed = await store.claim(id, 'sandbox-a', 60_000);
  if ('reason' in claimed) throw new Error(`claim missed: ${claimed.reason}`);
  t.same(await attemptRows(db, id), [], 'no attempts row while the attempt is in flight');
  const startedAt = await claimedAt(db, id);

  const shown = await loadDelivery(db, id);
  t.match(
    shown?.attempts,
    [{ number: 1, provider: 'sandbox-a', outcome: null, finished_at: null }],
    'the console shows the attempt in flight, from the claim',
  );
  const flying = (await providerOutcomes(db, 5)).find((p) => p.provider === 'sandbox-a');
  t.equal(flying?.in_flight, 1, 'the dashboard counts it in flight');

  // Fail-over: another provider answered.
  t.ok(
    await store.finish(claimed, {
      outcome: 'sent',
      provider: 'sandbox-b',
      providerMessageId: 'm1',
    }),
    'the outcome is recorded',
  );
  const rows = await attemptRows(db, id);
  t.same(
    rows.map((r) => ({ ...r, started_at: r.started_at.getTime() })),
    [
      {
        number: 1,
        provider: 'sandbox-b',
        outcome: 'sent',
        error: null,
        started_at: startedAt.getTime(),
      },
    ],
    'one row: the provider that answered, started when claimed',
  );
  const after = await providerOutcomes(db, 5);
  t.same(
    after.map((p) => [p.provider, p.sent, p.in_flight]),
    [['sandbox-b', 1, 0]],
    'the dashboard counts it sent, nothing in flight',
  );
});

t.test('a claim whose lease ran out is recorded lost by the next claim', async (t) => {
  const db = await migratedRecord(t, CLIENT);
  const store = new DeliveryStore(db, {});
  const id = await pendingSms(db, CLIENT, '+15550000002');
  const first = await store.claim(id, 'sandbox-a', 50);
  if ('reason' in first) throw new Error(`claim missed: ${first.reason}`);
  const firstAt = await claimedAt(db, id);
  await pause(120);
  const second = await store.claim(id, 'sandbox-b', 60_000);
  if ('reason' in second) throw new Error(`claim missed: ${second.reason}`);
  t.equal(second.attempt, 2, 'the next claim is attempt 2');
  const rows = await attemptRows(db, id);
  t.same(
    rows.map((r) => ({ ...r, started_at: r.started_at.getTime() })),
    [
      {
        number: 1,
        provider: 'sandbox-a',
        outcome: 'lost',
        error: 'worker stopped during the attempt',
        started_at: firstAt.getTime(),
      },
    ],
    'attempt 1 is lost, with its own provider and time; attempt 2 is in flight, no row',
  );
  t.equal(
    await store.finish(first, {
      outcome: 'sent',
      provider: 'sandbox-a',
      providerMessageId: 'late',
    }),
    null,
    'the first claim’s late outcome changes nothing',
  );
  t.ok(
    await store.finish(second, { outcome: 'sent', provider: 'sandbox-b', providerMessageId: 'm' }),
    'the second claim’s outcome is recorded',
  );
  t.same(
    (await attemptRows(db, id)).map((r) => [r.number, r.outcome]),
    [
      [1, 'lost'],
      [2, 'sent'],
    ],
    'two rows, each written once',
  );
});

t.test(
  'a suppression that fails a row whose claim ran out records that attempt lost',
  async (t) => {
    const db = await migratedRecord(t, CLIENT);
    const store = new DeliveryStore(db, {});
    const id = await pendingSms(db, CLIENT, '+15550000003');
    const first = await store.claim(id, 'sandbox-a', 50);
    if ('reason' in first) throw new Error(`claim missed: ${first.reason}`);
    await db.query(
      `INSERT INTO suppressions (client_id, tenant, channel, address, reason, source)
     VALUES ($1, 't', 'sms', '+15550000003', 'opt_out', 'api')`,
      [CLIENT],
    );
    await pause(120);
    const miss = await store.claim(id, 'sandbox-a', 60_000);
    if (!('reason' in miss) || miss.reason !== 'suppressed')
      throw new Error(`expected a suppressed miss, got ${JSON.stringify(miss)}`);
    t.ok(await store.failSuppressed(id, miss.hit), 'the delivery is failed by the suppression');
    t.same(
      (await attemptRows(db, id)).map((r) => [r.number, r.provider, r.outcome]),
      [[1, 'sandbox-a', 'lost']],
      'the attempt its claim left open is lost, not left in flight',
    );
    t.same(
      (await db.query('SELECT status, attempts, lease_until FROM deliveries WHERE id = $1', [id]))
        .rows[0],
      { status: 'failed', attempts: 1, lease_until: null },
      'failed, one attempt counted, no lease',
    );
  },
);

t.test(
  'a row a release before 017 opened at its claim is ended lost by the next claim',
  async (t) => {
    const db = await migratedRecord(t, CLIENT);
    const store = new DeliveryStore(db, {});
    const id = await pendingSms(db, CLIENT, '+15550000004');
    // As an earlier release's claim left it, its lease run out: the attempt's row open, no
    // claimed_at or provider on the delivery.
    await db.query(
      `UPDATE deliveries SET attempts = 1, version = 1, lease_until = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    await db.query(
      `INSERT INTO attempts (delivery_id, number, provider, started_at) VALUES ($1, 1, 'sandbox-old', now() - interval '1 minute')`,
      [id],
    );
    const next = await store.claim(id, 'sandbox-new', 60_000);
    if ('reason' in next) throw new Error(`claim missed: ${next.reason}`);
    t.equal(next.attempt, 2, 'the next claim is attempt 2');
    t.same(
      (await attemptRows(db, id)).map((r) => [r.number, r.provider, r.outcome]),
      [[1, 'sandbox-old', 'lost']],
      'the open row is ended lost, keeping its provider; attempt 2 is in flight, no row',
    );
  },
);
