import t from 'tap';
import { newId, resendDelivery } from '@ens/core';
import { connectNats, FEED_WAKE_SUBJECT } from '@ens/core/internal';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../../../test/harness/service.ts';
import { sendAlertEmail, type AlertNotice } from '../src/alerts/notify.ts';

/**
 * Every way a handoff is accepted (POST /v2/messages, an alert email, a console resend) wakes the
 * senders of its deliveries and the feed once it is stored, and a replay wakes nothing. Only the
 * API role runs here, so no worker's outcome wakes the feed in its place: a handoff that does not
 * wake the feed itself waits for the stamper's idle poll. (Alert emails once woke only the
 * senders; issue 24.)
 */

const svc = await startTestService(t, { roles: ['api'] });
const rt = svc.rt;
const nc = await connectNats(svc.engines.natsUrl, 'accept-wakeups-test');
t.teardown(() => nc.close());

const seen: { subject: string; data: string }[] = [];
nc.subscribe(FEED_WAKE_SUBJECT, {
  callback: (_e, m) => void seen.push({ subject: m.subject, data: m.string() }),
});
nc.subscribe('ens.send.>', {
  callback: (_e, m) => void seen.push({ subject: m.subject, data: m.string() }),
});
await nc.flush();

/** No wake-up for this long: what was published has all arrived. */
const QUIET_MS = 700;

async function quiet(): Promise<void> {
  for (let count = -1; count !== seen.length; ) {
    count = seen.length;
    await new Promise((r) => setTimeout(r, QUIET_MS));
  }
}

/**
 * What `accept` published: waits for the feed's wake-up (or `waitMs`), then until nothing more has
 * arrived for QUIET_MS. The wake-up publisher may send a copy of a burst's last wake-up a few
 * hundred milliseconds later, to confirm JetStream stored the burst (nats/checked-publisher.ts);
 * the wait keeps that copy in this window, and the send wake-ups are counted once per delivery.
 */
async function wakeupsOf(
  accept: () => Promise<unknown>,
  waitMs = 3_000,
): Promise<{ feed: number; sends: { subject: string; id: string }[] }> {
  // What came before (a setup's own send, and its copy) is over first.
  await quiet();
  seen.length = 0;
  await accept();
  await waitFor(
    async () => seen.some((s) => s.subject === FEED_WAKE_SUBJECT),
    waitMs,
    'a feed wake-up',
  ).catch(() => {});
  await quiet();
  const sends = new Map<string, { subject: string; id: string }>();
  for (const s of seen.filter((x) => x.subject !== FEED_WAKE_SUBJECT)) {
    const id = s.data.split(' ')[0]!;
    sends.set(`${s.subject} ${id}`, { subject: s.subject, id });
  }
  return {
    feed: seen.filter((s) => s.subject === FEED_WAKE_SUBJECT).length,
    sends: [...sends.values()],
  };
}

const notice = (firingId: string): AlertNotice => ({
  firingId,
  rule: {
    id: '1',
    name: 'Wake-up test',
    scope: 'tenant',
    value: 'acme',
    window_minutes: 60,
    min_volume: 1,
    threshold_percent: 50,
  },
  startedAt: new Date().toISOString(),
  total: 2,
  failed: 2,
  ratePercent: 100,
  consoleUrl: `${svc.baseUrl}/ops/alerts/1`,
});

t.test('POST /v2/messages wakes the senders and the feed', async (t) => {
  const c = await svc.createClient({ name: 'wakeups' });
  await svc.tenant(c, 'wk');
  const key = uniqueKey();
  let body: { deliveries: { delivery_id: string }[] } | undefined;
  const w = await wakeupsOf(async () => {
    const r = await svc.send(c, smsHandoff('wk', ['+15557770001', '+15557770002']), key);
    t.equal(r.status, 202);
    body = r.body;
  });
  t.ok(w.feed >= 1, 'the feed is woken');
  t.same(
    w.sends.map((s) => s.id).sort(),
    body!.deliveries.map((d) => d.delivery_id).sort(),
    'each delivery is woken',
  );
  t.ok(
    w.sends.every((s) => s.subject === 'ens.send.sms'),
    "on its channel's lane",
  );
  const replay = await wakeupsOf(
    async () =>
      t.equal(
        (await svc.send(c, smsHandoff('wk', ['+15557770001', '+15557770002']), key)).status,
        202,
      ),
    500,
  );
  t.same(replay, { feed: 0, sends: [] }, 'a replay wakes nothing');
});

t.test('an alert email wakes its sender and the feed', async (t) => {
  const firing = newId();
  const w = await wakeupsOf(() => sendAlertEmail(rt, notice(firing), 'oncall@example.com'));
  const ids = (
    await rt.db.query(
      `SELECT id::text FROM deliveries WHERE tenant = 'ens-ops' AND reference = $1`,
      [`alert-firing-${firing}`],
    )
  ).rows.map((r) => r.id as string);
  t.equal(ids.length, 1, 'one delivery');
  t.same(w.sends, [{ subject: 'ens.send.email', id: ids[0] }], "the email's sender is woken");
  t.ok(
    w.feed >= 1,
    'the feed is woken, so the new delivery is stamped without waiting for the poll',
  );
  const again = await wakeupsOf(
    () => sendAlertEmail(rt, notice(firing), 'oncall@example.com'),
    500,
  );
  t.same(again, { feed: 0, sends: [] }, 'the same firing again wakes nothing');
});

t.test('a console resend wakes its sender and the feed', async (t) => {
  const c = await svc.createClient({ name: 'wakeups-resend' });
  await svc.tenant(c, 'wr');
  const sent = await svc.send(c, smsHandoff('wr', ['+15557770003']));
  const first = sent.body.deliveries[0].delivery_id as string;
  // No worker runs here: the delivery is ended by hand, as a failed send would have ended it.
  await rt.db.query(
    `UPDATE deliveries SET status = 'failed', last_error = 'test', version = version + 1 WHERE id = $1`,
    [first],
  );
  const submission = newId();
  let made: Awaited<ReturnType<typeof resendDelivery>> | undefined;
  const w = await wakeupsOf(async () => {
    made = await resendDelivery(rt, first, submission);
  });
  t.ok(made?.ok, 'resent');
  t.same(
    w.sends,
    [{ subject: 'ens.send.sms', id: made?.ok ? made.deliveryId : '' }],
    "the new delivery's sender is woken",
  );
  t.ok(w.feed >= 1, 'the feed is woken');
  const again = await wakeupsOf(() => resendDelivery(rt, first, submission), 500);
  t.same(again, { feed: 0, sends: [] }, 'the same submission again wakes nothing');
});
