import t from 'tap';
import { pino } from 'pino';
import { retentionRound } from '@ens/core/internal';
import { migratedRecord } from '../harness/record-fixtures.ts';

/*
 * Attempts and callbacks have no foreign key to their delivery (migration 020): retention's delete
 * of the deliveries checks that none is left. The race that check is for: a dead letter replayed
 * (made pending again) after retention found its handoff done. The foreign key refused that delete
 * (23503); without it and without the check, the delivery went and its callback stayed pending,
 * pointing at nothing, to be posted without a body.
 */

const CLIENT = 'replay-race';

for (const [n, key] of [
  [1, 'its delivery’s first callback (keyed by the delivery’s id)'],
  [2, 'a later callback (an id of its own, found through callbacks_delivery)'],
] as const)
  t.test(
    `${key}, dead and replayed while retention removes its delivery: both stay, and so does the handoff`,
    async (t) => {
      const db = await migratedRecord(t, CLIENT);
      // Ids from the first days of uuid7 time: far older than any retention.
      const handoff = `0000000${n}-0000-7000-8000-000000000001`;
      const delivery = `0000000${n}-0000-7000-8000-000000000002`;
      const callback = n === 1 ? delivery : `0000000${n}-0000-7000-8000-000000000003`;
      await db.query(
        `INSERT INTO handoffs (id, client_id, tenant, event_type, messages)
         VALUES ($1, $2, 't', 'e', '{"sms":{"body":"x"}}')`,
        [handoff, CLIENT],
      );
      await db.query(
        `INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, channel, recipient, status, attempts, stamp_pending)
         VALUES ($1, $2, $3, 't', 'e', 'sms', '+15550000001', 'sent', 1, false)`,
        [delivery, handoff, CLIENT],
      );
      await db.query(
        `INSERT INTO attempts (delivery_id, number, provider, started_at, finished_at, outcome)
         VALUES ($1, 1, 'sandbox', now(), now(), 'sent')`,
        [delivery],
      );
      await db.query(
        `INSERT INTO callbacks (id, delivery_id, client_id, snapshot, status, attempts, last_error)
         VALUES ($1, $2, $3, '[]', 'dead', 3, 'HTTP 500')`,
        [callback, delivery, CLIENT],
      );

      // The replay, as CallbackStore.replay writes it, not yet committed.
      const replay = await db.connect();
      t.teardown(() => replay.release());
      await replay.query('BEGIN');
      await replay.query(
        `UPDATE callbacks SET status = 'pending', next_attempt_at = now(), lease_until = NULL, attempt_base = attempts, updated_at = now()
          WHERE id = $1 AND status = 'dead'`,
        [callback],
      );

      // Retention finds the handoff done (the replay is not visible to it) and goes on to remove
      // it, until its delete of the delivery's callbacks waits for the replay's row.
      const round = retentionRound(
        { db, logger: pino({ level: 'silent' }) },
        { retentionMs: 60_000, batchSize: 10 },
      );
      const waiting = async () =>
        (
          await db.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM callbacks%'`,
          )
        ).rowCount === 1;
      const t0 = Date.now();
      while (!(await waiting())) {
        if (Date.now() - t0 > 1_500) throw new Error('retention never waited for the replay');
        await new Promise((r) => setTimeout(r, 20));
      }
      // Committed well inside retention's lock timeout (2 s), so retention goes on rather than
      // ending its round early.
      await replay.query('COMMIT');
      const result = await round;

      const left = (
        await db.query<{
          handoffs: number;
          deliveries: number;
          attempts: number;
          callback: string;
        }>(
          `SELECT (SELECT count(*)::int FROM handoffs WHERE id = $1) AS handoffs,
                  (SELECT count(*)::int FROM deliveries WHERE id = $2) AS deliveries,
                  (SELECT count(*)::int FROM attempts WHERE delivery_id = $2) AS attempts,
                  (SELECT status FROM callbacks WHERE id = $3) AS callback`,
          [handoff, delivery, callback],
        )
      ).rows[0]!;
      t.same(
        left,
        { handoffs: 1, deliveries: 1, attempts: 1, callback: 'pending' },
        'the handoff, its delivery, its attempt and the replayed callback all stay',
      );
      t.equal(result.removed.deliveries, 0, 'the round removed no delivery');
      t.equal(
        (
          await db.query(
            'SELECT 1 FROM callbacks c WHERE NOT EXISTS (SELECT FROM deliveries d WHERE d.id = c.delivery_id)',
          )
        ).rowCount,
        0,
        'no callback is left without its delivery',
      );

      // Once the callback is posted, the next round removes the handoff with all its rows.
      await db.query(`UPDATE callbacks SET status = 'delivered' WHERE id = $1`, [callback]);
      const next = await retentionRound(
        { db, logger: pino({ level: 'silent' }) },
        { retentionMs: 60_000, batchSize: 10 },
      );
      t.same(
        [
          next.removed.deliveries,
          next.removed.callbacks,
          next.removed.attempts,
          next.removed.handoffs,
        ],
        [1, 1, 1, 1],
        'the next round, the callback posted, removes the delivery, its callback, its attempt and the handoff',
      );
    },
  );
