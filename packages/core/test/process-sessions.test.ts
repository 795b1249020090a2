import t from 'tap';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { CallbackStore, DeliveryStore } from '@ens/core';
import type { Db } from '@ens/core/internal';
import { ProcessSession, SessionReaper } from '../src/store/process-sessions.ts';
import { migratedRecord, pendingSms } from '../../../test/harness/record-fixtures.ts';

/*
 * Process sessions (store/process-sessions.ts) on a real PostgreSQL: a dead session's claims are
 * ended and fenced, a session ended while its process was paused is registered anew, and a process
 * whose own beats just broke judges no one.
 */

const CLIENT = 'sessions';
const TIMEOUT_MS = 400;
const silent = pino({ level: 'silent' });
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A pending sms delivery with a pending callback beside it; returns their ids. */
async function work(db: Db): Promise<{ delivery: string; callback: string }> {
  const delivery = await pendingSms(db, CLIENT, '+15550000000');
  const callback = randomUUID();
  await db.query(
    `INSERT INTO callbacks (id, delivery_id, client_id, url, body)
     VALUES ($1, $2, $3, 'http://receiver.test/', '{}')`,
    [callback, delivery, CLIENT],
  );
  return { delivery, callback };
}

t.test(
  'a dead session: its claims are ended at once, and its late results change nothing',
  async (t) => {
    const db = await migratedRecord(t, CLIENT);
    // The dead process: a session row whose heartbeat stopped, and the stores it claimed with.
    const dead = (
      await db.query<{ id: number }>(
        `INSERT INTO process_sessions (pid, host) VALUES (1, 'gone') RETURNING id`,
      )
    ).rows[0]!.id;
    const deadDeliveries = new DeliveryStore(db, {}, null, { id: () => dead });
    const deadCallbacks = new CallbackStore(db, db, null, { id: () => dead });
    const w = await work(db);
    const claimed = await deadDeliveries.claim(w.delivery, 'sandbox', 60_000);
    if ('reason' in claimed) throw new Error(`claim missed: ${claimed.reason}`);
    const cb = await deadCallbacks.claim(w.callback, 60_000);
    if ('miss' in cb) throw new Error(`callback claim missed: ${cb.miss}`);

    // The live process that judges.
    const session = new ProcessSession(db, TIMEOUT_MS, silent);
    await session.start();
    t.teardown(() => session.stop(null));
    const reaper = new SessionReaper(db, session, null);
    await db.query(
      `UPDATE process_sessions SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`,
      [dead],
    );
    t.equal(
      await reaper.pass(),
      null,
      'a process whose beats have not run a whole timeout judges no one',
    );
    await pause(TIMEOUT_MS + 200);
    const reaped = await reaper.pass();
    t.same(
      reaped && {
        sessions: reaped.sessions.map((s) => s.id),
        d: reaped.deliveries,
        c: reaped.callbacks,
      },
      { sessions: [dead], d: 1, c: 1 },
      'the dead session is ended with its delivery claim and its callback claim',
    );
    t.equal(await reaper.pass(), null, 'and only once');

    const row = (
      await db.query<{ version: number; leased: boolean; attempts: number }>(
        'SELECT version, lease_until IS NOT NULL AS leased, attempts FROM deliveries WHERE id = $1',
        [w.delivery],
      )
    ).rows[0]!;
    t.same(
      row,
      { version: claimed.version + 1, leased: false, attempts: 1 },
      'the delivery: lease ended, version moved on, the attempt still counted',
    );
    const attempt = (
      await db.query<{ outcome: string }>('SELECT outcome FROM attempts WHERE delivery_id = $1', [
        w.delivery,
      ])
    ).rows[0]!;
    t.equal(attempt.outcome, 'lost', 'its open attempt is marked lost');
    t.equal(
      await deadDeliveries.finish(claimed, {
        outcome: 'sent',
        provider: 'sandbox',
        providerMessageId: 'late',
      }),
      null,
      'the dead process’s late outcome is dropped (the fence)',
    );
    const cbRow = (
      await db.query<{ leased: boolean; status: string }>(
        'SELECT lease_until IS NOT NULL AS leased, status FROM callbacks WHERE id = $1',
        [w.callback],
      )
    ).rows[0]!;
    t.same(cbRow, { leased: false, status: 'pending' }, 'the callback: lease ended, still pending');

    // Another process claims it again under a live session and records its result.
    const live = new DeliveryStore(db, {}, null, session);
    const again = await live.claim(w.delivery, 'sandbox', 60_000);
    if ('reason' in again) throw new Error(`claim missed: ${again.reason}`);
    t.equal(again.attempt, 2, 'the next claim is attempt 2');
    t.ok(
      await live.finish(again, { outcome: 'sent', provider: 'sandbox', providerMessageId: 'm' }),
      'its outcome is recorded',
    );
    t.equal(
      await deadDeliveries.finish(claimed, {
        outcome: 'sent',
        provider: 'sandbox',
        providerMessageId: 'later',
      }),
      null,
      'and the dead process’s result still changes nothing',
    );
    const sent = await db.query(
      `SELECT 1 FROM attempts WHERE delivery_id = $1 AND outcome = 'sent'`,
      [w.delivery],
    );
    t.equal(sent.rowCount, 1, 'one recorded success');

    // A claim made under the ended session (its process paused, not yet aware) takes nothing.
    const other = await work(db);
    const miss = await deadDeliveries.claim(other.delivery, 'sandbox', 60_000);
    t.ok('reason' in miss, 'a claim under an ended session claims nothing');
    const cbMiss = await deadCallbacks.claim(other.callback, 60_000);
    t.ok('miss' in cbMiss, 'nor does a callback claim');
  },
);

t.test('a process whose session was ended registers anew at its next beat', async (t) => {
  const db = await migratedRecord(t, CLIENT);
  // Longer than the other cases' timeout: the check below must come before the new run of beats
  // is a timeout long, and on a loaded machine (a full run of the suite) 400 ms was not enough.
  const timeoutMs = 3_000;
  const session = new ProcessSession(db, timeoutMs, silent);
  await session.start();
  t.teardown(() => session.stop(null));
  const first = session.id();
  t.ok(first !== null, 'registered at start');
  await db.query('DELETE FROM process_sessions WHERE id = $1', [first]);
  // Beats come every timeout / 5 (600 ms here).
  for (let i = 0; i < 100 && (session.id() === first || session.id() === null); i++)
    await pause(20);
  const now = session.id();
  t.ok(now !== null && now !== first, `a new session (${first} -> ${now})`);
  t.equal(
    (await db.query('SELECT 1 FROM process_sessions WHERE id = $1', [now])).rowCount,
    1,
    'whose row is there',
  );
  t.notOk(session.mayJudge(), 'and it judges no one until its new run of beats is a timeout long');
});

t.test('a clean stop ends the session and the claims it still holds', async (t) => {
  const db = await migratedRecord(t, CLIENT);
  const session = new ProcessSession(db, TIMEOUT_MS, silent);
  await session.start();
  const reaper = new SessionReaper(db, session, null);
  const deliveries = new DeliveryStore(db, {}, null, session);
  const w = await work(db);
  const claimed = await deliveries.claim(w.delivery, 'sandbox', 60_000);
  if ('reason' in claimed) throw new Error(`claim missed: ${claimed.reason}`);
  const id = session.id();
  await session.stop(reaper);
  t.equal(
    (await db.query('SELECT 1 FROM process_sessions WHERE id = $1', [id])).rowCount,
    0,
    'the session is gone',
  );
  const row = (
    await db.query<{ leased: boolean }>(
      'SELECT lease_until IS NOT NULL AS leased FROM deliveries WHERE id = $1',
      [w.delivery],
    )
  ).rows[0]!;
  t.equal(row.leased, false, 'the claim it held is ended, not left to its lease');
});
