import t from 'tap';
import { slowSandbox, workerBench } from '../harness/worker-processes.ts';
import { waitFor } from '../harness/service.ts';
import { OPEN_ATTEMPTS_SQL } from '../harness/soak-measures.ts';

/*
 * Issue 26: a worker paused (SIGSTOP: a long GC pause, a frozen VM, a stopped container) is
 * declared dead when its heartbeat stops, and its claims are taken over within seconds. When it
 * resumes, its provider calls answer and it tries to record them: the fence (every outcome is
 * versioned, and the takeover moved the version on) must drop each one, so that no delivery gets
 * a second success or an outcome over a newer attempt. The process then notices its session was
 * ended, registers a new one and works on.
 */
t.test(
  'a paused worker resumed after its claims were taken over records nothing stale',
  async (t) => {
    const bench = await workerBench(t, { ENS_LEASE: '60s', ENS_SWEEP_GRACE: '30s' });
    const paused = await bench.worker({
      ENS_WORKER_CONCURRENCY: '10',
      ENS_PROVIDER_CONFIG: slowSandbox(8_000),
    });
    const pid = paused.child.pid!;
    const ids = await bench.accept(10);
    await waitFor(
      async () => (await bench.count(OPEN_ATTEMPTS_SQL)) === 10,
      20_000,
      'the paused worker to have 10 sends in flight',
    );
    process.kill(pid, 'SIGSTOP');
    t.teardown(() => {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // already gone
      }
    });
    const stoppedAt = Date.now();
    await bench.worker();
    await waitFor(
      async () =>
        (await bench.count(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`)) === 0,
      30_000,
      'the other worker to take the paused one’s deliveries over and send them',
    );
    t.comment(`taken over and sent ${Date.now() - stoppedAt} ms after the pause`);
    const versions = new Map(
      (
        await bench.svc.rt.db.query<{ id: string; version: number }>(
          'SELECT id, version FROM deliveries WHERE id = ANY($1::uuid[])',
          [ids],
        )
      ).rows.map((r) => [r.id, r.version]),
    );
    process.kill(pid, 'SIGCONT');
    // Its provider calls answer at once (their 8 s are long past); give its records time to land.
    await new Promise((r) => setTimeout(r, 5_000));
    t.equal(paused.child.exitCode, null, 'the resumed worker is still running');
    const outcomes = await bench.outcomes(ids);
    t.same(
      outcomes.filter((o) => o.status !== 'sent' || o.sent !== 1 || o.lost !== 1),
      [],
      'each delivery: sent, one recorded success, the paused attempt recorded lost',
    );
    const moved = (
      await bench.svc.rt.db.query<{ id: string; version: number }>(
        'SELECT id, version FROM deliveries WHERE id = ANY($1::uuid[])',
        [ids],
      )
    ).rows.filter((r) => r.version !== versions.get(r.id));
    t.same(moved, [], 'the resumed worker changed no delivery');
    t.equal(await bench.count(OPEN_ATTEMPTS_SQL), 0, 'no attempt is left open');
    await waitFor(
      async () =>
        (await bench.count(`SELECT count(*) AS n FROM process_sessions WHERE pid = ${pid}`)) === 1,
      10_000,
      'the resumed worker to register a new session',
    );
    // And it works on: new deliveries all end, with one success each.
    const more = await bench.accept(20);
    await waitFor(
      async () => (await bench.outcomes(more)).every((o) => o.status === 'sent' && o.sent === 1),
      30_000,
      'new deliveries to be sent after the resume',
    );
  },
);
