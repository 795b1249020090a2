import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startTestService, uniqueKey, waitFor, type TestService } from '../harness/service.ts';

/*
 * DESIGN invariant 1 for the engines: PostgreSQL is the source of truth, JetStream only carries
 * wake-ups. Losing the whole JetStream store, or killing PostgreSQL mid-flight, must still end
 * every accepted delivery in sent or failed, with exactly one recorded success.
 */
const FAULT_ENV = {
  ENS_LEASE: '2s',
  ENS_SWEEP_GRACE: '500ms',
  ENS_PROVIDER_CONFIG: JSON.stringify({ '@ens/plugin-sandbox': { sendDelayMs: 100 } }),
  ENS_WORKER_CONCURRENCY: '8',
};

async function sendMany(svc: TestService, n: number): Promise<string[]> {
  const client = await svc.createClient();
  await svc.tenant(client, 'fault');
  const recipients = Array.from(
    { length: n },
    (_, i) => `+1555700${String(i + 100).padStart(4, '0')}`,
  );
  const r = await svc.send(
    client,
    {
      tenant: 'fault',
      event_type: 'fault.test',
      messages: [{ channel: 'sms', recipients, content: { kind: 'rendered', body: 'x' } }],
    },
    uniqueKey('fault'),
  );
  if (r.status !== 202) throw new Error(`send failed: ${r.status} ${r.text}`);
  return r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id);
}

async function count(svc: TestService, sql: string): Promise<number> {
  return Number((await svc.rt.db.query<{ n: string }>(sql)).rows[0]!.n);
}

async function assertAllSentOnce(t: Test, svc: TestService, n: number): Promise<void> {
  await waitFor(
    async () => {
      try {
        return (
          (await count(svc, `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`)) === 0
        );
      } catch {
        return false; // PostgreSQL may still be recovering
      }
    },
    60_000,
    'every delivery to end',
  );
  const rows = await svc.rt.db.query<{ status: string; sent: string }>(
    `SELECT d.status, count(*) FILTER (WHERE a.outcome = 'sent') AS sent FROM deliveries d LEFT JOIN attempts a ON a.delivery_id = d.id GROUP BY d.id`,
  );
  t.equal(rows.rowCount, n);
  t.equal(rows.rows.filter((r) => r.status === 'sent').length, n, 'every delivery is sent');
  t.equal(
    rows.rows.filter((r) => Number(r.sent) !== 1).length,
    0,
    'each with exactly one recorded success',
  );
}

t.test('JetStream store lost in a NATS restart: every delivery still ends', async (t) => {
  const svc = await startTestService(t, { env: FAULT_ENV });
  const ids = await sendMany(svc, 150);
  await waitFor(
    async () =>
      (await count(svc, `SELECT count(*) AS n FROM deliveries WHERE status = 'sent'`)) >= 10,
    20_000,
    'progress',
  );
  await svc.engines.nats.kill9();
  await rm(join(svc.engines.dir, 'nats'), { recursive: true, force: true });
  const pending = await count(svc, `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`);
  t.ok(pending > 0, `${pending} deliveries were pending when the store was lost`);
  await svc.engines.nats.start();
  await assertAllSentOnce(t, svc, ids.length);
});

t.test('PostgreSQL killed and restarted mid-flight: every delivery still ends', async (t) => {
  const svc = await startTestService(t, { env: FAULT_ENV });
  const ids = await sendMany(svc, 150);
  await waitFor(
    async () =>
      (await count(svc, `SELECT count(*) AS n FROM deliveries WHERE status = 'sent'`)) >= 10,
    20_000,
    'progress',
  );
  await svc.engines.postgres.kill9();
  await new Promise((r) => setTimeout(r, 1000));
  await svc.engines.postgres.start();
  const pending = await count(svc, `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`);
  t.ok(pending > 0, `${pending} deliveries were pending at the restart`);
  await assertAllSentOnce(t, svc, ids.length);
});
