import t from 'tap';
import {
  startRolesBeside,
  startTestService,
  smsHandoff,
  sandboxPhones,
  waitFor,
} from '../harness/service.ts';
import { startReceiver } from '../harness/receiver.ts';

/**
 * A client whose receiver refuses every post must not stall other clients' callbacks while its
 * retries wait. Each refused post's wake-up waits in the queue for its retry; JetStream counts a
 * wake-up put back for later as unacknowledged, and stopped handing out any callback once the
 * consumer's allowance (10,000) was reached: another client's callback then waited for the refused
 * ones' back-off (up to an hour with the default ENS_CALLBACK_BACKOFF).
 */

/**
 * Long enough that no retry comes due while the test runs: on a loaded machine the 10,000 first
 * posts took longer than the 30 s this once was, so retries began before the test looked, every
 * post was made twice and the file's time doubled (141 s with five files at a time on two cores).
 */
const BACKOFF_MS = 600_000;
const svc = await startTestService(t, {
  roles: ['api', 'worker', 'feed'],
  env: { ENS_CALLBACK_BACKOFF: `${BACKOFF_MS}ms,${BACKOFF_MS}ms` },
});
// The callbacks role in a runtime of its own, as in a split deployment: a process that runs the
// worker and the callbacks role together posts its own outcomes' callbacks without the queue, and
// the other client's callback would then pass the stalled consumer by.
await startRolesBeside(t, svc, ['callbacks']);

t.test(
  "a receiver that refuses every post does not stall other clients' callbacks while its " +
    'retries wait',
  async (t) => {
    const refusing = await svc.createClient({ name: 'refused' });
    const quick = await svc.createClient({ name: 'quick-refused' });
    await svc.tenant(refusing, 'refused');
    await svc.tenant(quick, 'quick');
    const refuses = await startReceiver(t, [503]);
    const ok = await startReceiver(t);
    const n = 10_000;
    t.equal(
      (
        await svc.send(
          refusing,
          smsHandoff('refused', sandboxPhones(n, 100_000), { callback_url: refuses.url }),
        )
      ).status,
      202,
    );
    await waitFor(async () => refuses.posts.length >= n, 150_000, `${n} refused posts`);

    const sentAt = Date.now();
    t.equal(
      (
        await svc.send(
          quick,
          smsHandoff('quick', sandboxPhones(1, 5_001), { callback_url: ok.url }),
        )
      ).status,
      202,
    );
    // Before the fix it came only after the refused ones' retries: BACKOFF_MS, far past this wait.
    await waitFor(async () => ok.posts.length >= 1, 60_000, "the other client's callback");
    const waited = ok.posts[0]!.at - sentAt;
    t.comment(
      `with ${n} refused callbacks waiting ${BACKOFF_MS / 1000} s for their retry, the other client's callback arrived ${waited} ms after its send`,
    );
    t.ok(
      waited < 5_000,
      `the other client's callback did not wait for their retries (${waited} ms)`,
    );
  },
);
