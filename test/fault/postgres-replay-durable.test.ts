import pg from 'pg';
import t from 'tap';
import { multiHostUrl, startStandby, type Standby } from '../harness/pg-standby.ts';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/*
 * Issue 26: a 202 answered to a key sent again must be as durable as the first one. A primary with
 * a synchronous standby whose WAL sender is stopped (SIGSTOP), so commits wait for it. A handoff is
 * sent and its caller gives up after a second; its commit is written on the primary, and its wait
 * for the standby is then cut off (its backend terminated, as a PostgreSQL restart does), so the
 * handoff is on the primary only. The caller sends it again with its key: the answer must wait,
 * as a first accept waits, until the standby has the handoff (a failover before then would lose
 * it), and come once the standby catches up. Both doors of a replay: the batch (ens_accept_batch)
 * and the refusals checked before inline images are stored (refuseBeforeStoring).
 */

const PNG_1x1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
/** How long a replay must still be unanswered while the standby is held. */
const HELD_MS = 2_000;

t.test('a replayed 202 waits for the synchronous standby', async (t) => {
  let standby: Standby | undefined;
  const svc = await startTestService(t, {
    databaseUrl: async (engines) => {
      standby = await startStandby(t, engines.postgres, { synchronous: true });
      return multiHostUrl(
        engines.postgres.url,
        [engines.postgres.port, standby.handle.port],
        'read-write',
      );
    },
  });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const token = await client.token();
  const primary = new pg.Client({ connectionString: svc.engines.postgres.url });
  const replica = new pg.Client({ connectionString: standby!.handle.url });
  primary.on('error', () => {});
  replica.on('error', () => {});
  await primary.connect();
  await replica.connect();
  t.teardown(async () => {
    await primary.end().catch(() => {});
    await replica.end().catch(() => {});
  });

  const post = (key: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${svc.baseUrl}/v2/messages`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'idempotency-key': key,
      },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  const onStandby = async (handoffId: string) =>
    (await replica.query('SELECT 1 FROM handoffs WHERE id = $1', [handoffId])).rowCount === 1;

  const cases: { name: string; body: Record<string, unknown> }[] = [
    { name: 'a plain handoff (the batch)', body: smsHandoff('acme', ['+15557770001']) },
    {
      name: 'a handoff with inline images (the refusals checked before its files are stored)',
      body: {
        tenant: 'acme',
        event_type: 'test.event',
        messages: [
          {
            channel: 'email',
            recipients: ['ann@example.com'],
            content: {
              kind: 'rendered',
              body: 'hi',
              html: '<p><img src="cid:logo"></p>',
              inline_images: [{ cid: 'logo', data: PNG_1x1 }],
            },
          },
        ],
      },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, async (t) => {
      const key = uniqueKey('replay-durable');
      const sender = await standby!.holdReplication();
      let held = true;
      const release = () => {
        if (held) process.kill(sender, 'SIGCONT');
        held = false;
      };
      t.teardown(release);

      // The first request: its caller gives up while the commit waits for the standby.
      await t.rejects(
        post(key, c.body, AbortSignal.timeout(1_000)),
        'the first request is not answered while the standby is held',
      );
      // Its wait for the standby cut off: the commit stays, on the primary only. Its files'
      // record, written before the handoff, waits for the standby too: that wait is cancelled,
      // which PostgreSQL reports as committed, so the request goes on to store the handoff.
      const cutOff = await waitFor(
        async () => {
          const { rows } = await primary.query<{ pid: number; accept: boolean }>(
            `SELECT pid, query LIKE '%ens_accept_batch%' AS accept FROM pg_stat_activity
              WHERE wait_event = 'SyncRep'
                AND (query LIKE '%ens_accept_batch%' OR query LIKE 'INSERT INTO media_objects%')`,
          );
          for (const w of rows) {
            if (w.accept) {
              await primary.query('SELECT pg_terminate_backend($1)', [w.pid]);
              return true;
            }
            await primary.query('SELECT pg_cancel_backend($1)', [w.pid]);
          }
          return false;
        },
        5_000,
        "the accept's commit waiting for the standby",
      );
      t.ok(cutOff, "the accept's commit waited for the standby and its wait was cut off");
      const stored = await waitFor(
        async () =>
          (
            await primary.query<{ response: string }>(
              'SELECT response FROM idempotency_keys WHERE key = $1',
              [key],
            )
          ).rows[0],
        5_000,
        'the cut-off commit visible on the primary',
      );
      const handoffId = (JSON.parse(stored.response) as { handoff_id: string }).handoff_id;
      t.notOk(await onStandby(handoffId), 'the standby does not have it');
      // Where the primary's WAL ends now: past the handoff's commit record.
      const { rows: at } = await primary.query<{ lsn: string }>(
        'SELECT pg_current_wal_lsn()::text AS lsn',
      );
      const committedBy = at[0]!.lsn;
      // A synchronous standby has a commit once it has flushed its WAL (synchronous_commit=on),
      // and shows it only once it has replayed it, a moment later or, on a busy machine, longer.
      // Replay is paused here so that the check below reads what a 202 promises, not a race.
      await replica.query('SELECT pg_wal_replay_pause()');
      t.teardown(() => replica.query('SELECT pg_wal_replay_resume()').catch(() => {}));

      // Sent again with its key (alone: a first accept in the same batch would make it wait).
      let answered = false;
      const replay = post(key, c.body).then(async (r) => {
        answered = true;
        return { status: r.status, body: (await r.json()) as { handoff_id?: string } };
      });
      await new Promise((r) => setTimeout(r, HELD_MS));
      t.notOk(
        answered,
        `the replay is not answered in ${HELD_MS} ms while the standby lacks the handoff`,
      );

      release();
      const r = await replay;
      t.equal(r.status, 202, 'the replay is answered 202 once the standby catches up');
      t.equal(r.body.handoff_id, handoffId, 'with the original handoff');
      const { rows: flushed } = await replica.query<{ ok: boolean }>(
        'SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn AS ok',
        [committedBy],
      );
      t.ok(
        flushed[0]!.ok,
        "the standby had flushed the handoff's commit when the replay was answered",
      );
      await replica.query('SELECT pg_wal_replay_resume()');
      t.ok(
        await waitFor(() => onStandby(handoffId), 10_000, 'the handoff replayed on the standby'),
        'and shows the handoff once it replays its WAL',
      );
    });
  }
});
