import t from 'tap';
import { bundleEns } from '../harness/ens-bundle.ts';
import { startTestService } from '../harness/service.ts';

/**
 * How `ens` ends when it cannot do what it was asked: found as `ens` without arguments exiting 0,
 * `ens callbacks replay UNKNOWN_ID` exiting 0, and `ens migrate` against a database that does not
 * answer printing a stack trace.
 */

const [svc, runBuilt] = await Promise.all([startTestService(t), bundleEns(t)]);

t.test('usage and unreachable engines: a non-zero exit and one line, never a stack', async (t) => {
  const [none, replay, migrate] = await Promise.all([
    runBuilt([], svc.env),
    runBuilt(['callbacks', 'replay', '00000000-0000-4000-8000-000000000000'], svc.env),
    // Port 1 on loopback: nothing listens, the connection is refused.
    runBuilt(['migrate'], { ...svc.env, DATABASE_URL: 'postgres://ens:pw@127.0.0.1:1/ens' }),
  ]);
  t.equal(none.code, 2, 'ens without a command exits 2, as other usage mistakes do');
  t.equal(none.stdout, '');
  t.match(none.stderr, /^ens: no command given\n\nens — the ENS operator command/);

  t.equal(replay.code, 1, 'replaying an unknown callback id exits 1');
  t.same(JSON.parse(replay.stdout), { replayed: [] }, 'and says nothing was replayed');
  t.match(replay.stderr, /ens: no dead letter with id 00000000-0000-4000-8000-000000000000/);

  t.equal(migrate.code, 1, 'migrate against a database that does not answer exits 1');
  t.equal(migrate.stdout, '');
  const lines = migrate.stderr.trim().split('\n');
  t.match(
    lines.at(-1),
    /^ens: cannot reach the database \(.*ECONNREFUSED.*\); is PostgreSQL running/,
  );
  t.notMatch(migrate.stderr, /\n\s+at /, 'no stack trace');
});
