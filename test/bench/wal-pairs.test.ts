import t from 'tap';
import { parseWal } from './wal-pairs.ts';

// bench:wal-pairs reads both sides' figures from bench:wal's summary line; a change to that line
// must not leave the pairs reading nothing, or the wrong number.
const LINE =
  '**stock, callbacks on** (checkpoint_timeout=300s, fsync=on, server_version=15.20 (Debian 15.20-0+deb12u1), wal_compression=off): ' +
  '2 × 10000 deliveries, **2.30 KB WAL/delivery** (full-page images 0.8 %), **0.111 ms PostgreSQL CPU/delivery**; ' +
  'per handoff: 2.30 KB, 0.122 ms, 3.5 s (ENS 0.350 ms); 2.29 KB, 0.101 ms, 2.6 s (ENS 0.221 ms)';

t.test("bench:wal's summary line: CPU, WAL and each handoff", async (t) => {
  t.same(parseWal(`progress\n${LINE}\n\n| record type | … |\n`), {
    cpuMs: 0.111,
    walKb: 2.3,
    handoffs: [
      { cpuMs: 0.122, s: 3.5 },
      { cpuMs: 0.101, s: 2.6 },
    ],
  });
});

t.test('an output without the summary is an error naming it, not a zero', async (t) => {
  t.throws(() => parseWal('wal FAILED: no PostgreSQL'), /no bench:wal summary/);
});
