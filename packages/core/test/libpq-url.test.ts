import t from 'tap';
import { parseLibpqUrl, writerTarget } from '../src/db/libpq-url.ts';

t.test(
  'a URL of one host and no target_session_attrs reaches node-postgres untouched',
  async (t) => {
    for (const url of [
      'postgres://ens:pw@127.0.0.1:5432/ens',
      'postgresql://db.example.com/ens?sslmode=require',
      'postgres://u:p%40ss@[::1]:6543/ens',
      'postgres:///ens?host=/var/run/postgresql',
    ]) {
      const u = parseLibpqUrl(url);
      t.equal(u.url, url, url);
      t.equal(u.hosts.length, 1);
      t.equal(u.targetSessionAttrs, 'any');
    }
    t.same(parseLibpqUrl('postgres://u:p%40ss@[::1]:6543/ens').hosts, [
      { host: '::1', port: 6543 },
    ]);
    t.same(parseLibpqUrl('postgres:///ens?host=/var/run/postgresql').hosts, [
      { host: '/var/run/postgresql', port: 5432 },
    ]);
  },
);

t.test("libpq's multi-host form: each host with its port, the default where none", async (t) => {
  const u = parseLibpqUrl(
    'postgres://ens:s%2Fecret@h1:5432,h2,[fd00::2]:5434/ens?target_session_attrs=read-write&sslmode=require',
  );
  t.same(u.hosts, [
    { host: 'h1', port: 5432 },
    { host: 'h2', port: 5432 },
    { host: 'fd00::2', port: 5434 },
  ]);
  t.equal(u.targetSessionAttrs, 'read-write');
  t.equal(
    u.url,
    'postgres://ens:s%2Fecret@h1:5432/ens?sslmode=require',
    'node-postgres gets the first host, the credentials and the other parameters',
  );
  const parsed = new URL(u.url);
  t.equal(decodeURIComponent(parsed.password), 's/ecret');
});

t.test('host and port in the query, as libpq reads them, override the URI', async (t) => {
  t.same(parseLibpqUrl('postgresql:///ens?host=a,b,c&port=5433').hosts, [
    { host: 'a', port: 5433 },
    { host: 'b', port: 5433 },
    { host: 'c', port: 5433 },
  ]);
  t.same(parseLibpqUrl('postgresql://x/ens?host=a,b&port=1,2').hosts, [
    { host: 'a', port: 1 },
    { host: 'b', port: 2 },
  ]);
  const u = parseLibpqUrl('postgresql://u@/ens?host=/run/pg,/run/pg2&target_session_attrs=primary');
  t.same(u.hosts, [
    { host: '/run/pg', port: 5432 },
    { host: '/run/pg2', port: 5432 },
  ]);
  t.equal(u.url, 'postgresql://u@/ens?host=%2Frun%2Fpg&port=5432', 'a socket goes in host=');
});

t.test('every value of target_session_attrs libpq defines, and no other', async (t) => {
  for (const v of ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'])
    t.equal(parseLibpqUrl(`postgres://h/ens?target_session_attrs=${v}`).targetSessionAttrs, v);
  t.throws(
    () => parseLibpqUrl('postgres://h1,h2/ens?target_session_attrs=master'),
    /target_session_attrs=master is not one of any, read-write/,
  );
});

t.test('what cannot be read is said, without the password', async (t) => {
  const cases: [string, RegExp][] = [
    ['mysql://h/ens', /not a postgres/],
    ['postgres://u:secret@h1:5432,h2:x/ens', /port "x" is not a port/],
    ['postgres://u:secret@h1:70000/ens', /port "70000"/],
    ['postgres://u:secret@/ens?host=a,b,c&port=1,2', /2 ports for 3 hosts/],
    ['postgres://u:secret@[::1/ens', /IPv6/],
  ];
  for (const [url, expected] of cases) {
    const err = (() => {
      try {
        parseLibpqUrl(url);
      } catch (e) {
        return e as Error;
      }
    })();
    t.match(err?.message, expected, url);
    t.notMatch(err?.message, /secret/, 'no password in the message');
  }
});

t.test(
  "ENS's pools write: several hosts mean read-write; a standby is never asked for",
  async (t) => {
    t.equal(writerTarget(parseLibpqUrl('postgres://h/ens')), 'any', 'one host: as today');
    t.equal(writerTarget(parseLibpqUrl('postgres://h1,h2/ens')), 'read-write');
    t.equal(
      writerTarget(parseLibpqUrl('postgres://h1,h2/ens?target_session_attrs=any')),
      'read-write',
    );
    t.equal(
      writerTarget(parseLibpqUrl('postgres://h1,h2/ens?target_session_attrs=primary')),
      'primary',
    );
    t.equal(
      writerTarget(parseLibpqUrl('postgres://h/ens?target_session_attrs=read-write')),
      'read-write',
    );
    for (const v of ['standby', 'read-only', 'prefer-standby'])
      t.throws(
        () => writerTarget(parseLibpqUrl(`postgres://h1,h2/ens?target_session_attrs=${v}`)),
        /takes no writes/,
      );
  },
);
