import t from 'tap';
import pino from 'pino';
import { CallbackStore, DeliveryStore } from '@ens/core';
import type { ClaimedCallback, Db, InProcessPoster } from '@ens/core/internal';
import { ProcessSession, SessionReaper } from '../src/store/process-sessions.ts';
import { migratedRecord, pendingSms } from '../../../test/harness/record-fixtures.ts';

/*
 * A callback claimed by the outcome that queues it (DeliveryStore.postCallbacksHere), on a real
 * PostgreSQL: handed to this process's poster already claimed, with the same body and URL the
 * callbacks role's own claim gives; given back whole when its post cannot start; ended like any
 * claim when its process dies; and never claimed under a session that has ended.
 */

const CLIENT = 'in-process';
const URL = 'http://receiver.test/hook';
const LEASE_MS = 60_000;
const silent = pino({ level: 'silent' });

/** A pending sms delivery whose terminal state calls back (a URL, and a client secret). */
async function deliveryWithCallback(db: Db, recipient: string): Promise<string> {
  const id = await pendingSms(db, CLIENT, recipient);
  await db.query(
    'UPDATE handoffs SET callback_url = $2 WHERE id = (SELECT handoff_id FROM deliveries WHERE id = $1)',
    [id, URL],
  );
  return id;
}

/** A poster that keeps what it is handed, or does `then` with it. */
function keepingPoster(then: (c: ClaimedCallback) => void = () => {}): {
  poster: InProcessPoster;
  got: ClaimedCallback[];
} {
  const got: ClaimedCallback[] = [];
  return {
    got,
    poster: {
      leaseMs: LEASE_MS,
      takes: () => true,
      post(c) {
        got.push(c);
        then(c);
      },
    },
  };
}

async function callbackRow(db: Db, id: string) {
  const { rows } = await db.query<{
    attempts: number;
    leased: boolean;
    claimed_by: number | null;
    status: string;
  }>(
    'SELECT attempts, coalesce(lease_until > now(), false) AS leased, claimed_by, status FROM callbacks WHERE id = $1',
    [id],
  );
  return rows[0];
}

/** Claims and ends one delivery (sent) through `store`; returns its id. */
async function finishOne(store: DeliveryStore, db: Db, recipient: string): Promise<string> {
  const id = await deliveryWithCallback(db, recipient);
  const claimed = await store.claim(id, 'sandbox', 60_000);
  if ('reason' in claimed) throw new Error(`claim missed: ${claimed.reason}`);
  const done = await store.finish(claimed, {
    outcome: 'sent',
    provider: 'sandbox',
    providerMessageId: `m-${recipient}`,
  });
  if (done?.callbackId !== id) throw new Error(`finish gave ${JSON.stringify(done)}`);
  return id;
}

const db = await migratedRecord(t, CLIENT);
await db.query(`UPDATE clients SET callback_secret_enc = 'sealed' WHERE id = $1`, [CLIENT]);
const session = new ProcessSession(db, 400, silent);
await session.start();
t.teardown(() => session.stop(null));

t.test('the outcome claims its callback for this process and hands it over', async (t) => {
  const store = new DeliveryStore(db, {}, null, session);
  const callbacks = new CallbackStore(db, db, null, session);
  const { poster, got } = keepingPoster();
  store.postCallbacksHere(poster);
  const id = await finishOne(store, db, '+15550000001');

  t.equal(got.length, 1, 'the poster got the callback');
  t.same(
    await callbackRow(db, id),
    { attempts: 1, leased: true, claimed_by: session.id(), status: 'pending' },
    'inserted claimed: attempt 1, leased to this session',
  );
  t.same(await callbacks.claim(id, LEASE_MS), { miss: 'leased' }, 'no one else can claim it');

  // Given back (its post could not start), the callbacks role's own claim takes it: attempt 1
  // again, the same URL and the same bytes as the claim handed over.
  await callbacks.release(got[0]!);
  t.same(
    await callbackRow(db, id),
    { attempts: 0, leased: false, claimed_by: null, status: 'pending' },
    'given back as the insert would have left it unclaimed',
  );
  const claim = await callbacks.claim(id, LEASE_MS);
  if ('miss' in claim) throw new Error(`claim missed: ${claim.miss}`);
  const { inProcess, ...handed } = got[0]!;
  t.equal(inProcess, true, 'the handed-over claim says where it came from');
  t.same(claim, handed, "the same claim as the callbacks role's own");
  t.equal(claim.body, handed.body, 'byte for byte');
});

t.test(
  'a release after the lease ran out and another process claimed it changes nothing',
  async (t) => {
    const store = new DeliveryStore(db, {}, null, session);
    const callbacks = new CallbackStore(db, db, null, session);
    const { poster, got } = keepingPoster();
    store.postCallbacksHere(poster);
    const id = await finishOne(store, db, '+15550000006');
    // The post waited past its lease; the sweeper's wake-up let the callbacks role claim it again.
    await db.query("UPDATE callbacks SET lease_until = now() - interval '1 second' WHERE id = $1", [
      id,
    ]);
    const again = await callbacks.claim(id, LEASE_MS);
    if ('miss' in again) throw new Error(`claim missed: ${again.miss}`);
    t.equal(again.attempt, 2, 'the second claim is attempt 2');
    await callbacks.release(got[0]!);
    t.same(
      await callbackRow(db, id),
      { attempts: 2, leased: true, claimed_by: session.id(), status: 'pending' },
      "the late release of attempt 1 leaves attempt 2's claim alone",
    );
  },
);

t.test(
  'without a poster, or one that does not take it, the callback is queued unclaimed',
  async (t) => {
    const store = new DeliveryStore(db, {}, null, session);
    const id = await finishOne(store, db, '+15550000002');
    t.same((await callbackRow(db, id))?.attempts, 0, 'no poster: unclaimed');

    const { poster, got } = keepingPoster();
    store.postCallbacksHere({ ...poster, takes: () => false });
    const id2 = await finishOne(store, db, '+15550000003');
    t.equal(got.length, 0, 'not handed over');
    t.same(
      await callbackRow(db, id2),
      { attempts: 0, leased: false, claimed_by: null, status: 'pending' },
      'a client whose post would wait: unclaimed, left to its wake-up',
    );
  },
);

t.test("a dead process's callback claimed at its insert is ended and woken", async (t) => {
  const dead = (
    await db.query<{ id: number }>(
      `INSERT INTO process_sessions (pid, host) VALUES (1, 'gone') RETURNING id`,
    )
  ).rows[0]!.id;
  const store = new DeliveryStore(db, {}, null, { id: () => dead });
  // The process dies after the outcome's commit, before its post.
  const { poster, got } = keepingPoster();
  store.postCallbacksHere(poster);
  const id = await finishOne(store, db, '+15550000004');
  t.equal(got.length, 1);
  t.same((await callbackRow(db, id))?.claimed_by, dead);

  await db.query(
    `UPDATE process_sessions SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`,
    [dead],
  );
  const reaped = await new SessionReaper(db, session, null).end([dead], 1_000);
  t.ok((reaped?.callbacks ?? 0) >= 1, 'the reaper ended its callback claim');
  t.same(
    await callbackRow(db, id),
    { attempts: 1, leased: false, claimed_by: dead, status: 'pending' },
    'no longer leased: the next wake-up claims it',
  );

  // An outcome made under a session that has ended (the process was paused past its timeout,
  // and its claim ended meanwhile) claims nothing at the insert: its callback goes out unclaimed.
  const id2 = await deliveryWithCallback(db, '+15550000005');
  const claimed = await new DeliveryStore(db, {}, null, session).claim(id2, 'sandbox', 60_000);
  if ('reason' in claimed) throw new Error(`claim missed: ${claimed.reason}`);
  await store.finish(claimed, { outcome: 'sent', provider: 'sandbox', providerMessageId: 'm-5' });
  t.equal(got.length, 1, 'not handed over under an ended session');
  t.same(
    await callbackRow(db, id2),
    { attempts: 0, leased: false, claimed_by: null, status: 'pending' },
    'queued unclaimed',
  );
});
