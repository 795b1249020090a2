import t from 'tap';
import { spawnEns } from '../harness/ens-process.ts';
import { startReceiver } from '../harness/receiver.ts';
import { startTestService, uniqueKey, waitFor } from '../harness/service.ts';
import { OPEN_ATTEMPTS_SQL } from '../harness/soak-measures.ts';

/*
 * DESIGN invariant 1: a worker killed mid-send strands nothing. The worker runs in its own
 * process with slow sends, is SIGKILLed while attempts are open, and a fresh worker must finish
 * every delivery with exactly one recorded success (the unfinished attempts are marked lost).
 */
t.test(
  'kill -9 of the worker process mid-send: every delivery still ends, with exactly one success',
  async (t) => {
    const faultEnv = { ENS_LEASE: '2s', ENS_SWEEP_GRACE: '500ms' };
    // API, feed and callbacks in this process; the worker is a child we can kill.
    const svc = await startTestService(t, { roles: ['api', 'feed', 'callbacks'], env: faultEnv });
    const receiver = await startReceiver(t, [200]);
    const client = await svc.createClient();
    await svc.tenant(client, 'crash');
    const ids: string[] = [];
    for (let h = 0; h < 6; h++) {
      // Numbers end 0100–0149: none hits a sandbox failure suffix (0000, 1111, 2222).
      const recipients = Array.from(
        { length: 50 },
        (_, i) => `+1555${h + 2}${String(i + 100).padStart(4, '0')}`,
      );
      const r = await svc.send(
        client,
        {
          tenant: 'crash',
          event_type: 'crash.test',
          callback_url: receiver.url,
          messages: [{ channel: 'sms', recipients, content: { kind: 'rendered', body: 'x' } }],
        },
        uniqueKey('crash'),
      );
      t.equal(r.status, 202);
      ids.push(...r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id));
    }
    const workerEnv = {
      ...svc.env,
      ...faultEnv,
      ENS_WORKER_CONCURRENCY: '16',
      ENS_PROVIDER_CONFIG: JSON.stringify({ '@ens/plugin-sandbox': { sendDelayMs: 300 } }),
    };
    const first = spawnEns(['serve', '--roles', 'worker'], workerEnv);
    t.teardown(() => first.kill9());
    const count = async (sql: string) =>
      Number((await svc.rt.db.query<{ n: string }>(sql)).rows[0]!.n);
    await waitFor(
      async () => (await count(`SELECT count(*) AS n FROM deliveries WHERE status = 'sent'`)) >= 40,
      30_000,
      'the first worker to make progress',
    );
    const openAtKill = await count(OPEN_ATTEMPTS_SQL);
    await first.kill9();
    t.ok(openAtKill > 0, `the worker was killed with ${openAtKill} attempts in flight`);
    const pendingAtKill = await count(
      `SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`,
    );
    t.ok(pendingAtKill > 0, `${pendingAtKill} deliveries were still pending at the kill`);

    const second = spawnEns(['serve', '--roles', 'worker'], {
      ...workerEnv,
      ENS_WORKER_CONCURRENCY: '64',
      ENS_PROVIDER_CONFIG: '{}',
    });
    t.teardown(() => second.kill9());
    await waitFor(
      async () =>
        (await count(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`)) === 0,
      60_000,
      'every delivery to end',
    );

    const perDelivery = await svc.rt.db.query<{
      id: string;
      status: string;
      sent: string;
      lost: string;
      attempts: number;
    }>(
      `SELECT d.id, d.status, d.attempts,
            count(*) FILTER (WHERE a.outcome = 'sent') AS sent, count(*) FILTER (WHERE a.outcome = 'lost') AS lost
       FROM deliveries d LEFT JOIN attempts a ON a.delivery_id = d.id GROUP BY d.id`,
    );
    t.equal(perDelivery.rowCount, ids.length);
    t.same(
      perDelivery.rows.filter((r) => r.status !== 'sent'),
      [],
      'every delivery is sent',
    );
    t.same(
      perDelivery.rows.filter((r) => Number(r.sent) !== 1),
      [],
      'each delivery has exactly one recorded success',
    );
    const lost = perDelivery.rows.reduce((n, r) => n + Number(r.lost), 0);
    t.ok(lost > 0, `the attempts cut off by the kill are recorded as lost (${lost})`);
    t.equal(await count(OPEN_ATTEMPTS_SQL), 0, 'no attempt is left open');
    // Exactly one callback per delivery, each posted once.
    await waitFor(async () => receiver.posts.length >= ids.length, 20_000, 'callbacks');
    const posted = new Map<string, number>();
    for (const p of receiver.posts) {
      const id = (JSON.parse(p.raw.toString()) as { delivery_id: string }).delivery_id;
      posted.set(id, (posted.get(id) ?? 0) + 1);
    }
    t.equal(posted.size, ids.length, 'every delivery got its callback');
    t.same(
      [...posted.values()].filter((n) => n !== 1),
      [],
      'and only one',
    );
  },
);
