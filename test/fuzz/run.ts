/**
 * `npm run fuzz`: the API fuzz suite for as many requests as asked (FUZZ_REQUESTS, default 10,000;
 * FUZZ_SEED to replay). Prints progress every 10,000 requests and, on a failure, the smallest
 * failing request fast-check found, then exits 1.
 */
import fc from 'fast-check';
import { check, requests, startFuzzTarget } from './api-fuzz.ts';

const total = Number(process.env.FUZZ_REQUESTS ?? 10_000);
const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const teardowns: (() => unknown)[] = [];
let code = 1;
try {
  const target = await startFuzzTarget({ teardown: (fn) => void teardowns.push(fn) });
  const started = Date.now();
  let done = 0;
  const result = await fc.check(
    fc.asyncProperty(requests(target.tenant), async (req) => {
      const broken = await check(target, req);
      done++;
      if (done % 10_000 === 0)
        process.stderr.write(
          `fuzz: ${done} requests, ${Math.round((Date.now() - started) / 1000)} s\n`,
        );
      if (broken)
        throw new Error(
          `${broken}\n  request: ${req.method} ${req.path} ${JSON.stringify(req.headers)} ${(req.body ?? '').slice(0, 500)}`,
        );
    }),
    { numRuns: total, seed },
  );
  if (result.failed) {
    console.log(
      `fuzz: FAILED after ${result.numRuns} requests (seed ${seed}, replay with FUZZ_SEED=${seed}); smallest failing case:\n${String(result.errorInstance)}`,
    );
  } else {
    console.log(
      `fuzz: ${result.numRuns} requests (seed ${seed}): 0 5xx, every 4xx with a detail, 0 rows or files written by rejected requests, every accepted handoff and tenant read back as sent; ${Math.round((Date.now() - started) / 1000)} s`,
    );
    code = 0;
  }
} catch (e) {
  console.error('fuzz: error', e);
} finally {
  for (const fn of teardowns.reverse()) await Promise.resolve(fn()).catch(() => {});
}
process.exit(code);
