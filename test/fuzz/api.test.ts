import t from 'tap';
import fc from 'fast-check';
import { check, requests, startFuzzTarget } from './api-fuzz.ts';

/**
 * A few thousand generated requests over POST /v2/messages, the tenants, devices and suppressions
 * endpoints, the feed's query string, the token endpoint, the webhook routes and the one-click
 * unsubscribe links: never a 5xx, every 4xx with a detail (an unsubscribe link's 404 is its one
 * page), nothing written by a rejected request, accepted ones read back as sent. `npm run fuzz`
 * runs any number (see test/fuzz/run.ts). 1,000 here: 2,000 took 92 s with a soak beside the suite
 * and timed out (120 s) in a full run beside it, and the suite's time is budgeted.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 1000);

t.test(`${RUNS} generated requests keep the API's invariants`, async (t) => {
  const target = await startFuzzTarget(t);
  await fc.assert(
    fc.asyncProperty(requests(target.tenant), async (req) => {
      const broken = await check(target, req);
      if (broken)
        throw new Error(
          `${broken}\n  request: ${req.method} ${req.path} ${JSON.stringify(req.headers)} ${(req.body ?? '').slice(0, 500)}`,
        );
    }),
    { numRuns: RUNS, seed: Number(process.env.FUZZ_SEED ?? 20261124) },
  );
  t.pass(`${RUNS} requests, no invariant broken`);
});
