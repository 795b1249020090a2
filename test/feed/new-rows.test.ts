import t from 'tap';
import type pg from 'pg';
import { startTestService, uniqueKey } from '../harness/service.ts';

/*
 * The feed role leaves a new delivery to its outcome, which stamps it itself (issue 27: one write
 * of the row that is not HOT instead of two). It must still stamp a row changed again after a stamp
 * at once, stamp a new row once it is older than the cut-off, and never read the new rows to find
 * the others: with a backlog of new rows, each of its batches would read them all.
 */

/** The pool as the stamp sees it, keeping the text of every statement it runs. */
function recording(db: pg.Pool, texts: string[]): pg.Pool {
  const wrap = (c: pg.PoolClient): pg.PoolClient =>
    new Proxy(c, {
      get(target, prop) {
        const v = Reflect.get(target, prop);
        if (prop !== 'query') return typeof v === 'function' ? v.bind(target) : v;
        return (q: unknown, ...rest: unknown[]) => {
          if (typeof q === 'object' && q && 'text' in q) texts.push(String(q.text));
          return (v as (...a: unknown[]) => unknown).call(target, q, ...rest);
        };
      },
    });
  return new Proxy(db, {
    get(target, prop) {
      const v = Reflect.get(target, prop);
      if (prop === 'connect') return async () => wrap(await target.connect());
      if (prop === 'query')
        return (q: unknown, ...rest: unknown[]) => {
          if (typeof q === 'object' && q && 'text' in q) texts.push(String(q.text));
          return (v as (...a: unknown[]) => unknown).call(target, q, ...rest);
        };
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

t.test('the feed role stamps changed and older rows, and leaves new ones unread', async (t) => {
  // No worker and no feed role: the stamps below are the only ones.
  const svc = await startTestService(t, { roles: ['api'] });
  const { stampBatch } = await import('@ens/service-feed');
  const db = svc.rt.db;
  const client = await svc.createClient();
  await svc.tenant(client, 'fresh');
  const send = async (n: number, from: number) => {
    const r = await svc.send(
      client,
      {
        tenant: 'fresh',
        event_type: 'feed.fresh',
        messages: [
          {
            channel: 'sms',
            recipients: Array.from({ length: n }, (_, i) => `+1555310${String(from + i)}`),
            content: { kind: 'rendered', body: 'x' },
          },
        ],
      },
      uniqueKey('fresh'),
    );
    t.equal(r.status, 202);
    return r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id) as string[];
  };
  const FRESH = 60_000;

  const first = await send(2, 1000);
  t.equal(await stampBatch(db, 100, FRESH), 0, 'new rows are left to their outcome');
  t.equal(await stampBatch(db, 100, 0), 2, 'and stamped once they are older than the cut-off');

  await db.query(
    'UPDATE deliveries SET attempts = 3, version = version + 1, stamp_pending = true ' +
      'WHERE id = $1',
    [first[0]],
  );
  const backlog = await send(300, 2000);
  const texts: string[] = [];
  t.equal(
    await stampBatch(recording(db, texts), 100, FRESH),
    1,
    'a new row changed again after its stamp is stamped at once',
  );

  // The same statement again, explained: with 300 new rows waiting, the scans that found the one
  // changed row read no more than a few rows.
  const text = texts.find((q) => q.includes('feed_clock'));
  t.ok(text, 'the stamp statement was seen');
  await db.query(
    'UPDATE deliveries SET attempts = 4, version = version + 1, stamp_pending = true ' +
      'WHERE id = $1',
    [first[1]],
  );
  const c = await db.connect();
  t.teardown(() => c.release());
  await c.query(
    'BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; ' +
      'SET LOCAL enable_mergejoin = off',
  );
  const plan = await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, COSTS OFF) ${text}`, [
    100,
    FRESH,
  ]);
  await c.query('ROLLBACK');
  const lines = plan.rows.map((r) => r['QUERY PLAN']);
  let read = 0;
  let scan = false;
  for (const line of lines) {
    const actual = /actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/.exec(line);
    if (actual) {
      scan = /Scan .*on deliveries/.test(line) || /Scan using deliveries\S* on/.test(line);
      if (scan) read += Number(actual[1]) * Number(actual[2]);
    }
    const removed = /Rows Removed by (?:Filter|Index Recheck): (\d+)/.exec(line);
    if (removed && scan) read += Number(removed[1]);
  }
  t.ok(read < 20, `the stamp read ${read} rows of deliveries, not the 300 new ones`, { lines });

  t.equal(await stampBatch(db, 500, 0), 301, 'the backlog is stamped once old enough');
  t.equal(backlog.length, 300);
});
