import t from 'tap';
import { smsHandoff, startTestService } from '../harness/service.ts';

/*
 * The record right after a 202 (issue 25): a client that sends and at once pulls GET /v2/deliveries
 * sees the deliveries it was just told are accepted and durable, whatever the query: by reference,
 * by tenant, or none. (They used to appear only once the feed role had stamped them, ~0.3 s later.)
 * The feed walk's never-skip guarantee is tested alongside in no-skip.test.ts and below.
 */
t.test('deliveries are in the record as soon as their 202 is answered', async (t) => {
  const svc = await startTestService(t);
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const queries = [(ref: string) => `reference=${ref}`, () => 'tenant=acme', () => ''];
  let missing = 0;
  const rounds = 8;
  for (let i = 0; i < rounds; i++) {
    const ref = `right-after-${i}`;
    const r = await svc.send(
      client,
      smsHandoff('acme', [`+1555444${String(1000 + i)}`, `+1555444${String(2000 + i)}`], {
        reference: ref,
      }),
    );
    t.equal(r.status, 202);
    const ids: string[] = r.body.deliveries.map((d: any) => d.delivery_id);
    for (const q of queries) {
      const page = await client.call('GET', `/v2/deliveries?limit=1000&${q(ref)}`);
      t.equal(page.status, 200);
      const seen = new Set(page.body.results.map((row: any) => row.delivery_id));
      const absent = ids.filter((id) => !seen.has(id));
      missing += absent.length;
      t.same(
        absent,
        [],
        `round ${i}, query "${q(ref) || 'none'}": every delivery of the 202 is there`,
      );
    }
  }
  t.equal(missing, 0);

  // A walk from the start by updated_since and cursor still sees every delivery exactly once at
  // its latest change, with strictly increasing stamps.
  const all = await svc.feed(client);
  const stamps = all.map((row) => row.updated_at);
  t.same(stamps, [...stamps].sort(), 'stamps in feed order');
  t.equal(new Set(stamps).size, stamps.length, 'no stamp given twice');
});
