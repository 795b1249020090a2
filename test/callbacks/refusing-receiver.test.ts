import t from 'tap';
import { startTestService, smsHandoff, sandboxPhones, waitFor } from '../harness/service.ts';
import { startReceiver } from '../harness/receiver.ts';

/**
 * A client whose receiver refuses every post must not stall other clients' callbacks while its
 * retries wait. Each refused post's wake-up waits in the queue for its retry; JetStream counts a
 * wake-up put back for later as unacknowledged, and stopped handing out any callback once the
 * consumer's allowance (10,000) was reached: another client's callback then waited for the refused
 * ones' back-off (29.9 s here; up to an hour with the default ENS_CALLBACK_BACKOFF).
 */

/** Long enough that a retry waiting in the queue is still waiting when the test looks. */
const BACKOFF_MS = 30_000;
const svc = await startTestService(t, {
  env: { ENS_CALLBACK_BACKOFF: `${BACKOFF_MS}ms,${BACKOFF_MS}ms` },
});

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
    await waitFor(async () => refuses.posts.length >= n, 90_000, `${n} refused posts`);

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
    await waitFor(
      async () => ok.posts.length >= 1,
      BACKOFF_MS + 10_000,
      "the other client's callback",
    );
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
