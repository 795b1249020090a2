import t from 'tap';
import { jetstreamManager } from '@nats-io/jetstream';
import { SEND_STREAM } from '@ens/core/internal';
import { startNatsCluster } from '../harness/nats-cluster.ts';
import { startReceiver } from '../harness/receiver.ts';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/**
 * A three-node JetStream cluster with replicas 3, under a flood of handoffs: one node is killed
 * with kill -9 and restarted, then the node that leads the send stream is killed. The API keeps
 * answering 202 (or 503 with Retry-After, never a 500), and every accepted delivery ends and has
 * its callback posted.
 */
t.test('a NATS node, then the stream leader, killed mid-flood', async (t) => {
  const cluster = await startNatsCluster(t, 3);
  const receiver = await startReceiver(t);
  const svc = await startTestService(t, {
    natsUrl: cluster.url,
    env: { ENS_NATS_REPLICAS: '3', ENS_SWEEP_GRACE: '1s', ENS_LEASE: '3s' },
  });
  const jsm = await jetstreamManager(svc.rt.nc);
  t.equal(
    (await jsm.streams.info(SEND_STREAM)).config.num_replicas,
    3,
    'the send stream has 3 replicas',
  );

  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const token = await client.token();
  const statuses = new Map<number, number>();
  const bad: string[] = [];
  let flooding = true;
  const lane = async (n: number) => {
    for (let i = 0; flooding; i++) {
      const res = await fetch(`${svc.baseUrl}/v2/messages`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'idempotency-key': uniqueKey(`cl-${n}`),
        },
        body: JSON.stringify(
          smsHandoff('acme', [`+1555${n}${String(i).padStart(6, '0')}`], {
            callback_url: receiver.url,
          }),
        ),
        signal: AbortSignal.timeout(15_000),
      });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status !== 202 && !(res.status === 503 && res.headers.get('retry-after')))
        bad.push(`${res.status} ${await res.text()}`);
      else await res.arrayBuffer();
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const lanes = [1, 2].map(lane);
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  await pause(1000);
  const first = cluster.nodes[1]!;
  await first.kill9();
  await pause(2000);
  await first.start();
  await pause(2000);
  const leader = await cluster.leaderOf(SEND_STREAM);
  await leader.kill9();
  await pause(3000);
  await leader.start();
  await pause(1000);
  flooding = false;
  await Promise.all(lanes);

  t.same(
    bad.slice(0, 5),
    [],
    `every answer was 202 or 503 with Retry-After (${JSON.stringify(Object.fromEntries(statuses))})`,
  );
  const accepted = statuses.get(202) ?? 0;
  t.ok(accepted > 50, `${accepted} handoffs were accepted during the faults`);
  const count = async (sql: string) =>
    Number((await svc.rt.db.query<{ n: string }>(sql)).rows[0]!.n);
  await waitFor(
    async () =>
      (await count(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`)) === 0,
    90_000,
    'every delivery to end',
  );
  t.equal(
    await count(`SELECT count(*) AS n FROM deliveries`),
    accepted,
    'one delivery per accepted handoff',
  );
  await waitFor(
    async () =>
      (await count(`SELECT count(*) AS n FROM callbacks WHERE status <> 'delivered'`)) === 0,
    90_000,
    'every callback to be posted',
  );
  t.equal(
    await count(`SELECT count(*) AS n FROM callbacks WHERE status = 'delivered'`),
    accepted,
    "every delivery's callback was posted",
  );
});
