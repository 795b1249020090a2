import t from 'tap';
import { startTestService, waitFor, uniqueKey } from '../harness/service.ts';

/*
 * DESIGN invariant 3: a caller walking GET /v2/deliveries with updated_since = the last updated_at
 * it saw, following next_cursor, sees every change even while writers commit out of order. The
 * writers here hold their transactions open for random times, so commit order differs from the
 * order in which they changed rows; a feed stamped by the writers themselves would skip changes.
 */
t.test(
  'a walker following updated_since and cursor sees every change under concurrent writers',
  async (t) => {
    // No worker: the only writers are the ones below, so the final state is known exactly.
    const svc = await startTestService(t, { roles: ['api', 'feed'] });
    const client = await svc.createClient();
    await svc.tenant(client, 'feed');
    const recipients = Array.from(
      { length: 200 },
      (_, i) => `+1555300${String(i).padStart(4, '0')}`,
    );
    const sent = await svc.send(
      client,
      {
        tenant: 'feed',
        event_type: 'feed.test',
        messages: [{ channel: 'sms', recipients, content: { kind: 'rendered', body: 'x' } }],
      },
      uniqueKey('feed'),
    );
    t.equal(sent.status, 202);
    const ids: string[] = sent.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id);

    const seen = new Map<string, { attempts: number; updated_at: string }>();
    let cursorStamp = '';
    let pages = 0;
    let orderViolations = 0;
    const walkOnce = async () => {
      let url = `/v2/deliveries?limit=37${cursorStamp ? `&updated_since=${encodeURIComponent(cursorStamp)}` : ''}`;
      for (;;) {
        const r = await client.call('GET', url);
        if (r.status !== 200) throw new Error(`feed answered ${r.status}: ${r.text}`);
        pages++;
        for (const row of r.body.results as {
          delivery_id: string;
          attempts: number;
          updated_at: string;
        }[]) {
          // Timestamps are fixed-width UTC strings, so string order is time order.
          if (cursorStamp && !(row.updated_at > cursorStamp)) orderViolations++;
          cursorStamp = row.updated_at;
          seen.set(row.delivery_id, { attempts: row.attempts, updated_at: row.updated_at });
        }
        if (!r.body.next_cursor) return;
        url = `/v2/deliveries?limit=37&cursor=${encodeURIComponent(r.body.next_cursor)}`;
      }
    };

    let writing = true;
    let changes = 0;
    const writer = async () => {
      while (writing) {
        const id = ids[Math.floor(Math.random() * ids.length)]!;
        const c = await svc.rt.db.connect();
        try {
          await c.query('BEGIN');
          await c.query(
            'UPDATE deliveries SET attempts = attempts + 1, version = version + 1, ' +
              'stamp_pending = true WHERE id = $1',
            [id],
          );
          // Hold the change uncommitted for a while so later transactions commit first.
          await new Promise((r) => setTimeout(r, Math.random() * 40));
          await c.query('COMMIT');
          changes++;
        } finally {
          c.release();
        }
      }
    };
    const walker = async () => {
      while (writing) {
        await walkOnce();
        await new Promise((r) => setTimeout(r, Math.random() * 20));
      }
    };
    const writers = Array.from({ length: 8 }, writer);
    const walkers = walker();
    await new Promise((r) => setTimeout(r, 4000));
    writing = false;
    await Promise.all([...writers, walkers]);

    // Let the feed stamp the last changes, then finish the walk from where the walker stopped.
    await waitFor(
      async () =>
        (await svc.rt.db.query('SELECT 1 FROM deliveries WHERE stamp_pending LIMIT 1')).rowCount ===
        0,
      5000,
      'stamping to settle',
    );
    await walkOnce();

    const truth = await svc.rt.db.query<{ id: string; attempts: number }>(
      'SELECT id, attempts FROM deliveries',
    );
    const missed = truth.rows.filter((r) => seen.get(r.id)?.attempts !== r.attempts);
    t.ok(changes > 200, `writers committed ${changes} changes`);
    t.ok(pages > 20, `the walker read ${pages} pages while writers ran`);
    t.equal(orderViolations, 0, 'updated_at strictly increases in feed order');
    t.equal(seen.size, ids.length, 'every delivery was seen');
    t.same(
      missed.map((r) => ({ id: r.id, db: r.attempts, walker: seen.get(r.id)?.attempts })),
      [],
      'the walker holds the latest state of every delivery',
    );
  },
);

t.test(
  'a row changed by an uncommitted transaction is stamped after that transaction commits',
  async (t) => {
    const svc = await startTestService(t, { roles: ['api'] });
    const { stampBatch } = await import('@ens/service-feed');
    const client = await svc.createClient();
    await svc.tenant(client, 'lock');
    const r = await svc.send(client, {
      tenant: 'lock',
      event_type: 'feed.lock',
      messages: [
        {
          channel: 'sms',
          recipients: ['+15553100001', '+15553100002'],
          content: { kind: 'rendered', body: 'x' },
        },
      ],
    });
    const [a, b] = r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id) as [
      string,
      string,
    ];
    await stampBatch(svc.rt.db, 100);
    const holder = await svc.rt.db.connect();
    t.teardown(() => holder.release());
    await holder.query('BEGIN');
    await holder.query('UPDATE deliveries SET attempts = 7, stamp_pending = true WHERE id = $1', [
      a,
    ]);
    await svc.rt.db.query(
      'UPDATE deliveries SET attempts = 5, stamp_pending = true WHERE id = $1',
      [b],
    );
    t.equal(await stampBatch(svc.rt.db, 100), 1, 'only the committed change is stamped');
    const stampOf = async (id: string) =>
      (
        await svc.rt.db.query<{ u: string }>(
          'SELECT updated_at::text AS u FROM deliveries WHERE id = $1',
          [id],
        )
      ).rows[0]!.u;
    const bStamp = await stampOf(b);
    await holder.query('COMMIT');
    t.equal(await stampBatch(svc.rt.db, 100), 1, 'the late commit is stamped in the next batch');
    t.ok((await stampOf(a)) > bStamp, 'and gets a later stamp than everything already visible');
  },
);
