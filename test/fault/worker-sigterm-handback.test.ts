import t from 'tap';
import { slowSandbox, workerBench } from '../harness/worker-processes.ts';
import { waitFor } from '../harness/service.ts';
import { OPEN_ATTEMPTS_SQL } from '../harness/soak-measures.ts';

/*
 * Issue 26: SIGTERM (a rolling deploy, a scale-down) stops a worker's intake at once and hands back
 * the work it holds but has not started, so another process sends it within seconds rather than
 * after the sweeper's grace; the sends it has in flight finish and are recorded, once, before it
 * exits within its bounded grace.
 */
t.test('SIGTERM: held work is handed back at once, in-flight sends finish', async (t) => {
  const bench = await workerBench(t, { ENS_LEASE: '60s', ENS_SWEEP_GRACE: '30s' });
  const stopping = await bench.worker({
    ENS_WORKER_CONCURRENCY: '5',
    ENS_PROVIDER_CONFIG: slowSandbox(3_000),
  });
  const ids = await bench.accept(40);
  await waitFor(
    async () => (await bench.count(OPEN_ATTEMPTS_SQL)) === 5,
    20_000,
    '5 sends in flight',
  );
  await bench.worker();
  const termAt = Date.now();
  stopping.child.kill('SIGTERM');
  await waitFor(
    async () =>
      (await bench.count(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`)) === 0,
    10_000,
    'every delivery to end within 10 s of the SIGTERM',
  );
  t.comment(`all 40 ended ${Date.now() - termAt} ms after the SIGTERM`);
  const code = await Promise.race([
    stopping.exited,
    new Promise((r) => setTimeout(() => r('still running'), 15_000)),
  ]);
  t.equal(code, 0, 'the stopped worker exited cleanly within its grace');
  const outcomes = await bench.outcomes(ids);
  t.same(
    outcomes.filter((o) => o.status !== 'sent' || o.sent !== 1 || o.lost !== 0),
    [],
    'every delivery sent once, none lost: the in-flight sends finished and were recorded',
  );
  t.equal(
    await bench.count(
      `SELECT count(*) AS n FROM attempts WHERE delivery_id = ANY('{${ids.join(',')}}'::uuid[])`,
    ),
    40,
    'one attempt per delivery: nothing handed back counts as an attempt',
  );
});
