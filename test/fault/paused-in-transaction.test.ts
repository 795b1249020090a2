import t from 'tap';
import pg from 'pg';
import { isDatabaseUnavailable } from '@ens/core/internal';
import { startTestService } from '../harness/service.ts';

/*
 * Issue 26: a process paused (SIGSTOP, a frozen VM) inside a transaction kept its row locks for the
 * whole pause. In the soak (2026-11-27, round 43) a worker paused for 62 s so held up the
 * dead-sessions job, which waits on the rows it ends, and with it the retry of every process's
 * lost work: deliveries waited 62-116 s. ENS's pools now have PostgreSQL end a session idle in a
 * transaction for twice ENS_SESSION_TIMEOUT.
 *
 * Here a transaction on the runtime's pool takes a row lock and then does nothing, as a paused
 * process does; another connection's update of the row must go through within that time (plus a
 * margin), and the paused one's next statement fails as PostgreSQL being away does, so its
 * caller retries on a new connection.
 */
const SESSION_TIMEOUT_MS = 2_000;

t.test('a transaction left idle by a paused process releases its locks', async (t) => {
  const svc = await startTestService(t, {
    roles: [],
    env: { ENS_SESSION_TIMEOUT: `${SESSION_TIMEOUT_MS}ms` },
  });
  await svc.rt.db.query('CREATE TABLE paused_probe (id int PRIMARY KEY, n int NOT NULL)');
  await svc.rt.db.query('INSERT INTO paused_probe VALUES (1, 0)');

  const paused = await svc.rt.db.connect();
  // The pool drops a client whose connection PostgreSQL ended; the test keeps its own error.
  paused.on('error', () => {});
  await paused.query('BEGIN');
  await paused.query('UPDATE paused_probe SET n = n + 1 WHERE id = 1');
  const pausedAt = Date.now();

  // Another process, without the setting: it waits for the lock, at most 15 s.
  const other = new pg.Client({ connectionString: svc.env.DATABASE_URL });
  await other.connect();
  t.teardown(() => other.end());
  await other.query("SET statement_timeout = '15s'");
  const updated = await other.query('UPDATE paused_probe SET n = n + 10 WHERE id = 1').then(
    () => Date.now() - pausedAt,
    (err: Error) => err,
  );
  t.type(updated, 'number', 'the other connection got the lock');
  const within = 2 * SESSION_TIMEOUT_MS + 2_000;
  t.ok(
    typeof updated === 'number' && updated <= within,
    `the lock was released ${typeof updated === 'number' ? updated : '-'} ms after the pause (at most ${within})`,
  );

  const next = await paused.query('SELECT 1').then(
    () => null,
    (err: unknown) => err,
  );
  t.ok(next !== null, "the paused process's next statement fails");
  t.ok(isDatabaseUnavailable(next), 'as PostgreSQL being away does, so its caller retries');
  paused.release(true);
  const { rows } = await svc.rt.db.query<{ n: number }>('SELECT n FROM paused_probe');
  t.equal(rows[0]!.n, 10, "the paused transaction's change was rolled back");
});
