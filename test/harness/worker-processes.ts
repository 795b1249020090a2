import { spawnEns, type EnsProcess } from './ens-process.ts';
import {
  freePort,
  sandboxPhones,
  smsHandoff,
  startTestService,
  uniqueKey,
  waitFor,
  type Teardown,
  type TestClient,
  type TestService,
} from './service.ts';

/*
 * The fault tests of worker processes (test/fault/worker-*.test.ts): the API, feed and callbacks
 * roles in the test's own process, and worker processes the test can kill, pause or stop, each
 * an `ens serve --roles worker` against the same engines.
 */

export interface WorkerBench {
  svc: TestService;
  client: TestClient;
  /** Runs a `SELECT count(*) AS n …` and returns n. */
  count(sql: string): Promise<number>;
  /** Accepts one sms handoff to `n` sandbox numbers; returns its delivery ids. */
  accept(n: number): Promise<string[]>;
  /** Starts a worker process and waits until it is ready (its /readyz answers 200). */
  worker(env?: Record<string, string>): Promise<EnsProcess>;
  /** Per delivery: its status, and how many of its attempts were recorded sent and lost. */
  outcomes(ids: string[]): Promise<{ id: string; status: string; sent: number; lost: number }[]>;
}

/** A sandbox that answers each send after `ms`, so that sends are in flight when a fault hits. */
export const slowSandbox = (ms: number) =>
  JSON.stringify({ '@ens/plugin-sandbox': { sendDelayMs: ms } });

export async function workerBench(
  t: Teardown,
  env: Record<string, string> = {},
): Promise<WorkerBench> {
  const svc = await startTestService(t, { roles: ['api', 'feed', 'callbacks'], env });
  const client = await svc.createClient();
  await svc.tenant(client, 'faults');
  let from = 100;
  const count = async (sql: string) =>
    Number((await svc.rt.db.query<{ n: string }>(sql)).rows[0]!.n);
  return {
    svc,
    client,
    count,
    async accept(n) {
      const recipients = sandboxPhones(n, from);
      from += n + 10;
      const r = await svc.send(client, smsHandoff('faults', recipients), uniqueKey('fault'));
      if (r.status !== 202) throw new Error(`accept: ${r.status} ${r.text}`);
      return r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id);
    },
    async worker(workerEnv = {}) {
      const health = await freePort();
      const p = spawnEns(['serve', '--roles', 'worker'], {
        ...svc.env,
        ...env,
        ENS_HEALTH_PORT: String(health),
        ...workerEnv,
      });
      t.teardown(() => p.kill9());
      const ready = () =>
        fetch(`http://127.0.0.1:${health}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
          (r) => r.status === 200,
          () => false,
        );
      await waitFor(
        async () =>
          (await ready()) ||
          (p.child.exitCode !== null ? Promise.reject(new Error(p.output())) : false),
        60_000,
        'the worker process to be ready',
      );
      return p;
    },
    async outcomes(ids) {
      const { rows } = await svc.rt.db.query<{
        id: string;
        status: string;
        sent: string;
        lost: string;
      }>(
        `SELECT d.id, d.status, count(*) FILTER (WHERE a.outcome = 'sent') AS sent,
                count(*) FILTER (WHERE a.outcome = 'lost') AS lost
           FROM deliveries d LEFT JOIN attempts a ON a.delivery_id = d.id
          WHERE d.id = ANY($1::uuid[]) GROUP BY d.id`,
        [ids],
      );
      return rows.map((r) => ({
        id: r.id,
        status: r.status,
        sent: Number(r.sent),
        lost: Number(r.lost),
      }));
    },
  };
}
