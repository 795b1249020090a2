import t from 'tap';
import { stampBatch, stampClient } from '@ens/core/internal';
import { migratedRecord, pendingSms } from '../harness/record-fixtures.ts';

/*
 * Every writer of feed stamps takes the feed clock's row lock before it locks any delivery row.
 * An outcome does (FINISH_SQL takes the clock first, then updates its rows); a read's stamping of
 * its client's rows (STAMP_CLIENT_SQL) locked its batch first and then waited for the clock, so a
 * read racing an outcome on the same row deadlocked, and the read answered 500 (seen in the suite:
 * test/e2e/failover.test.ts, "deadlock detected ... while locking tuple in relation feed_clock").
 */

const CLIENT = 'clock-order';

t.test(
  'a read stamping its client’s rows while an outcome holds the clock waits, and both end',
  async (t) => {
    const db = await migratedRecord(t, CLIENT);
    const id = await pendingSms(db, CLIENT, '+15550000009');
    const outcome = await db.connect();
    t.teardown(() => outcome.release());
    // The outcome: the clock first, as FINISH_SQL takes it.
    await outcome.query('BEGIN');
    await outcome.query(`SET LOCAL deadlock_timeout = '100ms'`);
    await outcome.query('SELECT last FROM feed_clock WHERE id = 1 FOR UPDATE');
    // The read's stamping, racing it.
    const read = stampClient(db, CLIENT).then(
      (n) => ({ n }),
      (e: Error) => ({ error: e.message }),
    );
    await new Promise((r) => setTimeout(r, 300));
    // Then the outcome's update of the row.
    const updated = await outcome
      .query(`UPDATE deliveries SET status = 'sent', version = version + 1 WHERE id = $1`, [id])
      .then(
        (r) => ({ rows: r.rowCount }),
        (e: Error) => ({ error: e.message }),
      );
    await outcome.query('rows' in updated && updated.rows === 1 ? 'COMMIT' : 'ROLLBACK');
    t.same(updated, { rows: 1 }, 'the outcome updates its row (no deadlock)');
    t.same(await read, { n: 1 }, 'the read stamps the row once the outcome has committed');
  },
);

t.test('an idle pass of the feed role does not take the clock', async (t) => {
  const db = await migratedRecord(t, CLIENT);
  // Held elsewhere: a pass that takes it (and so writes a lock and uses a transaction id, every
  // 200 ms in the feed role) would wait here.
  const holder = await db.connect();
  t.teardown(() => holder.release());
  await holder.query('BEGIN');
  await holder.query('SELECT last FROM feed_clock WHERE id = 1 FOR UPDATE');
  const pass = Promise.race([
    stampBatch(db, 5000, 60_000),
    new Promise<string>((r) => setTimeout(() => r('still waiting after 2 s'), 2_000)),
  ]);
  t.equal(await pass, 0, 'it finds nothing to stamp without waiting for the clock');
  await holder.query('ROLLBACK');
});
