import t from 'tap';
import { acceptHandoff, migrate } from '@ens/core';
import { createPool, type Db } from '@ens/core/internal';
import { startTestEngines } from '../../../test/harness/engines.ts';
import { smsAcceptInput } from '../../../test/harness/sms-accept-input.ts';

/*
 * Issue 27: a delivery's foreign key to its handoff ran a trigger query per accepted delivery (a
 * key-share lookup of the handoff it was just inserted with), about two fifths of the accept's
 * PostgreSQL CPU. Migration 023 drops it; retention, the one deleter of handoffs, checks in its
 * DELETE that no delivery is left (test/retention/retention.test.ts fails without that check).
 * Seen here by what the lookups leave behind: one scan of handoffs' primary key per delivery.
 */

const N = 200;

/** Scans of handoffs' primary key so far, as the statistics report them. */
async function handoffKeyScans(db: Db): Promise<number> {
  await db.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.query<{ n: string }>(
    `SELECT idx_scan AS n FROM pg_stat_user_indexes WHERE indexrelname = 'handoffs_pkey' AND schemaname = current_schema()`,
  );
  return Number(rows[0]!.n);
}

t.test('accepting a handoff does not look its handoff up once per delivery', async (t) => {
  const engines = await startTestEngines(t);
  const db = createPool(engines.databaseUrl, { max: 2 });
  // One session, so that its statistics can be flushed on demand.
  const accepts = createPool(engines.databaseUrl, { max: 1 });
  t.teardown(async () => {
    await Promise.all([db.end(), accepts.end()]);
  });
  await migrate(db);
  await db.query(`INSERT INTO clients (id, name, secret_hash) VALUES ('c1', 'keys', 'x')`);
  await db.query(`INSERT INTO tenants (client_id, id) VALUES ('c1', 't')`);
  t.same(
    (
      await db.query(
        `SELECT conname FROM pg_constraint WHERE conrelid = 'deliveries'::regclass AND contype = 'f'`,
      )
    ).rows,
    [],
    'deliveries have no foreign key',
  );

  await accepts.query('SELECT pg_stat_force_next_flush()');
  const before = await handoffKeyScans(db);
  const input = smsAcceptInput(
    'c1',
    'k',
    Array.from({ length: N }, (_, i) => `+1555000${String(i).padStart(4, '0')}`),
  );
  const outcome = await acceptHandoff(accepts, input);
  t.equal(outcome.outcome, 'created');
  t.equal(
    Number(
      (
        await db.query('SELECT count(*) AS n FROM deliveries WHERE handoff_id = $1', [
          input.handoffId,
        ])
      ).rows[0].n,
    ),
    N,
    `the ${N} deliveries were stored`,
  );
  // The accepting session reports its statistics when it is next idle.
  await accepts.query('SELECT pg_stat_force_next_flush()');
  await accepts.query('SELECT 1');
  const scans = (await handoffKeyScans(db)) - before;
  t.ok(
    scans < N / 10,
    `the accept scanned handoffs' primary key ${scans} times for ${N} deliveries`,
  );
});
