import t from 'tap';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/**
 * PostgreSQL unreachable for a while during a flood of handoffs: the API answers 503 with
 * Retry-After and a detail (never a 500, never a hang past a client's timeout); nothing is
 * half-written, so retrying each refused request with its Idempotency-Key once PostgreSQL is back
 * accepts it exactly once; and every accepted delivery ends.
 */
/**
 * 5 s in npm test; ENS_TEST_PG_AWAY_MS=30000 gives the half-minute outage of a PostgreSQL
 * fail-over.
 */
const AWAY_MS = Number(process.env.ENS_TEST_PG_AWAY_MS ?? 5_000);
const CLIENT_TIMEOUT_MS = 10_000;

t.test('PostgreSQL away during a flood', async (t) => {
  // A short lease: a send claimed just before PostgreSQL went away is retried after it, not a
  // minute later.
  const svc = await startTestService(t, { env: { ENS_SWEEP_GRACE: '500ms', ENS_LEASE: '3s' } });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const token = await client.token();

  const outcomes: {
    key: string;
    body: unknown;
    status: number;
    ms: number;
    retryAfter: string | null;
    detail: unknown;
  }[] = [];
  let flooding = true;
  const flood = async (lane: number) => {
    let i = 0;
    while (flooding) {
      const key = uniqueKey(`pg-away-${lane}-${i++}`);
      const body = smsHandoff('acme', [
        `+1555${String(lane).padStart(2, '0')}${String(i).padStart(5, '0')}`,
      ]);
      const started = Date.now();
      let status = 0;
      let retryAfter: string | null = null;
      let detail: unknown;
      try {
        const res = await fetch(`${svc.baseUrl}/v2/messages`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'idempotency-key': key,
          },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
        });
        status = res.status;
        retryAfter = res.headers.get('retry-after');
        detail = ((await res.json()) as { detail?: unknown }).detail;
      } catch (e) {
        status = -1; // timed out or connection refused
        detail = (e as Error).message;
      }
      outcomes.push({ key, body, status, ms: Date.now() - started, retryAfter, detail });
      if (status !== 202) await new Promise((r) => setTimeout(r, 100));
    }
  };
  const lanes = [0, 1, 2, 3].map(flood);
  await new Promise((r) => setTimeout(r, 1000));
  await svc.engines.postgres.kill9();
  await new Promise((r) => setTimeout(r, AWAY_MS));
  await svc.engines.postgres.start();
  await new Promise((r) => setTimeout(r, 2000));
  flooding = false;
  await Promise.all(lanes);

  const refused = outcomes.filter((o) => o.status !== 202);
  t.ok(
    refused.length > 0,
    `${refused.length} of ${outcomes.length} requests were refused while PostgreSQL was away`,
  );
  const wrong = refused.filter(
    (o) => o.status !== 503 || !o.retryAfter || typeof o.detail !== 'string',
  );
  t.same(wrong.slice(0, 5), [], 'every refusal is a 503 with Retry-After and a detail');
  t.ok(
    Math.max(...outcomes.map((o) => o.ms)) < CLIENT_TIMEOUT_MS,
    'no request hung until the client gave up',
  );

  // Each refused request again, with its key: accepted now, and once only.
  // A refused request whose transaction did commit (the answer was lost, not the work) comes back
  // as a replay: 202 either way, never a second handoff.
  const retried: number[] = [];
  for (const o of refused) {
    const r = await client.call('POST', '/v2/messages', {
      body: o.body,
      headers: { 'idempotency-key': o.key },
    });
    retried.push(r.status);
  }
  t.same(
    retried.filter((s) => s !== 202),
    [],
    'every refused request, retried with its key and body, is accepted',
  );
  const accepted = outcomes.filter((o) => o.status === 202).length + refused.length;
  const handoffs = Number(
    (await svc.rt.db.query<{ n: string }>('SELECT count(*) AS n FROM handoffs')).rows[0]!.n,
  );
  t.equal(handoffs, accepted, 'one handoff per key: nothing half-written, nothing doubled');
  await waitFor(
    async () =>
      Number(
        (
          await svc.rt.db.query<{ n: string }>(
            `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`,
          )
        ).rows[0]!.n,
      ) === 0,
    60_000,
    'every delivery to end',
  );
  t.pass('every accepted delivery ended');
});
