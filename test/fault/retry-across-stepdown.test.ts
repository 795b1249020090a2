import t from 'tap';
import { SEND_STREAM, sendConsumer } from '@ens/core/internal';
import { startNatsCluster } from '../harness/nats-cluster.ts';
import { consumerLeader, stepDownConsumer } from '../harness/leader-faults.ts';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/**
 * Retries the worker nak'ed with their back-off while the send consumers' JetStream leaders step
 * down. A nak sent while a consumer elects its leader reaches nobody and is dropped without a word;
 * the new leader then holds the message as delivered, and the retry waited for the sweeper
 * (ENS_SWEEP_GRACE, 30 s; ~31 s here before the fix) with nothing showing it (the soak's step-down
 * rounds: 74 such retries). Now a nak is sent until a leader hears it, and a retry comes at its due
 * time.
 */
const CONSUMERS = [sendConsumer('sms', 'next'), sendConsumer('sms', 'bulk')];
/** The back-off between attempts. */
const BACKOFF_MS = 500;
/** How late an attempt may come after its due time. */
const MAX_LATE_MS = 4_000;

t.test('retries waiting out their back-off when the send consumers step down', async (t) => {
  const cluster = await startNatsCluster(t, 3);
  const svc = await startTestService(t, {
    natsUrl: cluster.url,
    env: { ENS_NATS_REPLICAS: '3', ENS_RETRY_BACKOFF: `${BACKOFF_MS}ms,${BACKOFF_MS}ms` },
  });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');

  // The sandbox fails a number ending in 1111 transiently on its first two attempts. One recipient
  // a handoff wakes the first lane, fifty the bulk lane. Handoffs keep coming through the
  // step-downs, so retries wait out their back-off before, during and after each election.
  let n = 0;
  const flaky = (count: number) =>
    Array.from({ length: count }, () => `+1555${String(n++).padStart(4, '0')}1111`);
  const statuses: number[] = [];
  let trickling = true;
  const trickle = async (everyMs: number, recipients: number) => {
    while (trickling) {
      const r = await svc.send(client, smsHandoff('acme', flaky(recipients)), uniqueKey('retry'));
      statuses.push(r.status);
      await new Promise((res) => setTimeout(res, everyMs));
    }
  };
  const trickles = [trickle(100, 1), trickle(250, 50)];
  await new Promise((r) => setTimeout(r, 3_000));
  for (const c of [...CONSUMERS, ...CONSUMERS, ...CONSUMERS]) {
    const before = await consumerLeader(cluster.url, SEND_STREAM, c);
    t.match(await stepDownConsumer(cluster.url, SEND_STREAM, c), { success: true });
    await waitFor(
      async () => {
        const l = await consumerLeader(cluster.url, SEND_STREAM, c).catch(() => undefined);
        return l && l !== before ? l : undefined;
      },
      15_000,
      `a new leader for ${c}`,
    );
  }
  await new Promise((r) => setTimeout(r, 4_000));
  trickling = false;
  await Promise.all(trickles);
  t.same(
    statuses.filter((s) => s !== 202),
    [],
    `all ${statuses.length} handoffs accepted`,
  );

  await waitFor(
    async () => {
      const r = await svc.rt.db.query<{ n: string }>(
        `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`,
      );
      return Number(r.rows[0]!.n) === 0;
    },
    90_000,
    'every delivery to end',
  );
  const { rows } = await svc.rt.db.query<{ number: number; late: number }>(
    `SELECT a.number, extract(epoch FROM a.started_at - p.finished_at) * 1000 - $1 AS late
       FROM attempts a JOIN attempts p ON p.delivery_id = a.delivery_id AND p.number = a.number - 1
      ORDER BY late DESC`,
    [BACKOFF_MS],
  );
  const sent = await svc.rt.db.query<{ n: string }>(
    `SELECT count(*) AS n FROM deliveries WHERE status = 'sent' AND attempts = 3`,
  );
  t.equal(Number(sent.rows[0]!.n), n, 'every delivery sent on its third attempt');
  t.equal(rows.length, 2 * n, 'two retries each');
  const worst = Math.round(Number(rows[0]!.late));
  t.comment(`latest retry: attempt ${rows[0]!.number}, ${worst} ms after its due time`);
  t.ok(worst < MAX_LATE_MS, `every retry came within ${MAX_LATE_MS} ms of its due time`);
});
