import t from 'tap';
import { alive, childrenOf, fresh, startServe, tokenFor } from '../harness/serve-processes.ts';
import { startTestService, uniqueKey, waitFor } from '../harness/service.ts';

// Three multi-process services in one file: beside the suite's other fault files on two cores it
// ran past tap's 120 s (fresh clone, a soak beside it); alone beside the soak it took 82 s.
t.setTimeout(240_000);

/*
 * ENS_PROCESSES: one `ens serve` runs several processes sharing the port, supervised. What is
 * kept per process would make N processes behave as N services: the request rate limit (N times
 * the limit) and /metrics (a scrape would see one process's counters). Both are answered for the
 * whole serve; a process that dies is started again; a signal stops them all.
 */

const accepted = (metrics: string) =>
  Number(/^ens_deliveries_accepted_total\{channel="sms"\} (\d+)/m.exec(metrics)?.[1] ?? 0);

t.test('ENS_PROCESSES=2: one service of two processes, supervised', async (t) => {
  const svc = await startTestService(t, { roles: [] });
  const { p, port, pids } = await startServe(t, svc, {
    ENS_PROCESSES: '2',
    ENS_RATE_LIMIT: '20',
    ENS_LEASE: '2s',
    ENS_SWEEP_GRACE: '500ms',
  });
  t.equal(pids.length, 2, 'two processes');
  t.same(
    childrenOf(p.child.pid!).sort(),
    [...pids].sort(),
    'both are children of the supervising process',
  );
  const token = await tokenFor(port, svc);
  const auth = { authorization: `Bearer ${token}` };

  await t.test('the request rate limit holds for the serve, not per process', async (t) => {
    // 60 requests at once, each on its own connection, so both processes take some. Counted per
    // process, up to 2 × 20 would pass. All in one second of the limiter, else tried again.
    for (let round = 1; ; round++) {
      await new Promise((r) => setTimeout(r, 1_100));
      const t0 = Date.now();
      const rs = await Promise.all(
        Array.from({ length: 60 }, () => fresh(port, 'GET', '/v2/tenants', auth)),
      );
      const ms = Date.now() - t0;
      if (ms > 800 && round < 4) continue;
      const ok = rs.filter((r) => r.status === 200).length;
      t.equal(ok, 20, `20 of 60 answered (round ${round}, ${ms} ms)`);
      t.equal(rs.filter((r) => r.status === 429).length, 40, 'the rest 429');
      await new Promise((r) => setTimeout(r, 1_100)); // the next subtests start with a fresh second
      return;
    }
  });

  const send = async (n: number, tag: string) => {
    for (let i = 0; i < n; i++) {
      await new Promise((r) => setTimeout(r, 60)); // under the rate limit
      const r = await fresh(
        port,
        'POST',
        '/v2/messages',
        { ...auth, 'content-type': 'application/json', 'idempotency-key': uniqueKey(tag) },
        JSON.stringify({
          tenant: 'procs',
          event_type: 'procs.test',
          messages: [
            {
              channel: 'sms',
              recipients: [`+1555300${String(i + 100).padStart(4, '0')}`],
              content: { kind: 'rendered', body: 'x' },
            },
          ],
        }),
      );
      if (r.status !== 202) throw new Error(`send: ${r.status} ${r.text}`);
    }
  };
  const tenant = await fresh(
    port,
    'POST',
    '/v2/tenants',
    { ...auth, 'content-type': 'application/json' },
    JSON.stringify({ tenant: 'procs' }),
  );
  t.ok(tenant.status === 201 || tenant.status === 200, 'tenant provisioned');

  await t.test('/metrics answers for every process of the serve', async (t) => {
    await send(20, 'metrics');
    for (let i = 0; i < 6; i++) {
      const m = await fresh(port, 'GET', '/metrics');
      t.equal(m.status, 200);
      t.equal(accepted(m.text), 20, `scrape ${i + 1}: 20 accepted, whichever process answered`);
    }
    const m = await fresh(port, 'GET', '/metrics');
    const up = m.text.split('\n').filter((l) => l.startsWith('ens_consumer_up{'));
    t.ok(
      up.length > 0 && up.every((l) => l.endsWith(' 1')),
      `every loop up, each reported once as 1, not summed over processes: ${up.join('; ')}`,
    );
    t.equal(new Set(up.map((l) => l.split(' ')[0])).size, up.length, 'one line per loop');
  });

  await t.test('a process killed with -9 is started again, and nothing is lost', async (t) => {
    // The first process also runs the feed writer: the one whose loss matters most.
    process.kill(pids[0]!, 'SIGKILL');
    const now = await waitFor(
      async () => {
        const c = childrenOf(p.child.pid!);
        return c.length === 2 && !c.includes(pids[0]!) ? c : null;
      },
      30_000,
      'a new process in place of the killed one',
    );
    t.ok(now.includes(pids[1]!), 'the other process kept running');
    // The supervisor's log reaches this process through a pipe, possibly after pgrep saw the new
    // process.
    await waitFor(
      async () => /an ENS process stopped; starting it again/.test(p.output()),
      10_000,
      'the restart in the log',
    );
    t.pass('the restart is logged');
    await send(20, 'after-kill');
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
    const r = await svc.rt.db.query<{ status: string; n: string }>(
      'SELECT status, count(*) AS n FROM deliveries GROUP BY status',
    );
    t.same(
      r.rows.map((x) => [x.status, Number(x.n)]),
      [['sent', 40]],
      'all 40 deliveries sent',
    );
    // The feed writer came back with its process: the feed shows every delivery.
    await waitFor(
      async () =>
        Number(
          (
            await svc.rt.db.query<{ n: string }>(
              'SELECT count(*) AS n FROM deliveries WHERE stamp_pending',
            )
          ).rows[0]!.n,
        ) === 0,
      30_000,
      'every change stamped into the feed',
    );
  });

  await t.test(
    'a process that keeps dying soon after its start is restarted after a growing pause',
    async (t) => {
      const pauses = () =>
        p
          .output()
          .split('\n')
          .filter((l) => l.includes('starting it again'))
          .map((l) => (JSON.parse(l) as { restartInMs: number }).restartInMs);
      const seen = pauses().length;
      for (let round = 0; round < 2; round++) {
        // Always the first process's replacement (the second has run untouched since the start).
        const victim = childrenOf(p.child.pid!).find((c) => c !== pids[1])!;
        process.kill(victim, 'SIGKILL');
        await waitFor(
          async () => {
            const now = childrenOf(p.child.pid!);
            return now.length === 2 && !now.includes(victim) ? now : null;
          },
          30_000,
          `process ${victim} replaced`,
        );
      }
      // The process killed in the previous subtest may itself have died within 10 s of its start,
      // so the first pause here is 0.5 s or already 1 s; each next one doubles.
      await waitFor(async () => pauses().length >= seen + 2, 10_000, 'both restarts in the log');
      const [first, second] = pauses().slice(seen);
      t.ok(first === 500 || first === 1000, `a death within 10 s of its start waits (${first} ms)`);
      t.equal(second, first! * 2, `the next one twice as long (${second} ms)`);
    },
  );

  await t.test('SIGTERM to the supervisor stops every process, cleanly', async (t) => {
    const before = childrenOf(p.child.pid!);
    p.child.kill('SIGTERM');
    t.equal(await p.exited, 0, 'exit 0');
    for (const pid of before) t.notOk(alive(pid), `process ${pid} stopped`);
  });
});

t.test(
  'ENS_PROCESSES=2: a burst of one client is admitted up to its limit, less at most a lease ' +
    'per process',
  async (t) => {
    // Each process spends leases of perSecond / (8 × processes) requests (services/api/src/limits/
    // leased-limits.ts); what a process leased and did not spend by the end of the second is lost,
    // so a second may admit up to processes × (lease − 1) fewer than the limit, never more than it.
    // Reproduced before the fix: requests arriving together each asked for a lease of their own,
    // the first asks took the second's whole count, and the rest were refused while most of it sat
    // unspent in the leases: 92 of a burst of 160 admitted, and 51 of a burst of 200, under a limit
    // of 160.
    const limit = 160;
    const processes = 2;
    const lease = Math.floor(limit / (8 * processes));
    const svc = await startTestService(t, { roles: [] });
    const { port } = await startServe(t, svc, {
      ENS_PROCESSES: String(processes),
      ENS_RATE_LIMIT: String(limit),
    });
    const auth = { authorization: `Bearer ${await tokenFor(port, svc)}` };
    for (const demand of [limit, limit * 1.25, limit * 2]) {
      for (let round = 1; ; round++) {
        await new Promise((r) => setTimeout(r, 1_100));
        const t0 = Date.now();
        const rs = await Promise.all(
          Array.from({ length: demand }, () => fresh(port, 'GET', '/v2/tenants', auth)),
        );
        const ms = Date.now() - t0;
        // All in one second of the limiter, else tried again: spread over two, more may pass
        // rightly.
        if (ms > 800 && round < 4) continue;
        const ok = rs.filter((r) => r.status === 200).length;
        t.equal(
          ok + rs.filter((r) => r.status === 429).length,
          demand,
          `a burst of ${demand}: every request is answered 200 or 429`,
        );
        t.ok(
          ok <= limit,
          `never more than the limit: ${ok} of ${demand} admitted (round ${round}, ${ms} ms)`,
        );
        t.ok(
          ok >= limit - processes * (lease - 1),
          `and at most ${processes} × (${lease} − 1) fewer: ${ok} ≥ ${limit - processes * (lease - 1)}`,
        );
        break;
      }
    }
  },
);
