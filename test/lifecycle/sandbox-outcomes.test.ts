import t from 'tap';
import { randomUUID } from 'node:crypto';
import { pluginContext } from '@ens/service-worker';
import {
  startTestService,
  waitFor,
  type TestClient,
  type TestService,
} from '../harness/service.ts';

/**
 * The sandbox table of issue 2, row by row and on every channel each row names, seen through the
 * pull endpoint (the authoritative record) and the attempts table.
 */

const svc: TestService = await startTestService(t);
const client: TestClient = await svc.createClient();
await svc.tenant(client, 'acme');

const whatsapp = (recipients: string[]) => ({
  channel: 'whatsapp',
  recipients,
  content: { kind: 'template', template_name: 'order_update', language: 'en', body_params: ['42'] },
});

/** One handoff that exercises every row of the table on every channel. */
const accepted = await svc.send(client, {
  tenant: 'acme',
  event_type: 'sandbox.table',
  reference: 'sandbox-table',
  messages: [
    {
      channel: 'sms',
      recipients: ['+15550000000', '+15551111111', '+15551230001'],
      content: { kind: 'rendered', body: 'hi' },
    },
    {
      channel: 'email',
      recipients: ['fail@example.com', 'flaky@example.com', 'someone@example.com'],
      content: { kind: 'rendered', body: 'hi', subject: 's' },
    },
    {
      channel: 'push',
      recipients: ['fail', 'flaky', 'user-7'],
      content: { kind: 'rendered', body: 'hi' },
    },
    whatsapp(['+15550000000', '+15551111111', '+15552222222', '+15551230002']),
  ],
});
t.equal(accepted.status, 202, 'the table handoff is accepted');
const ids = new Map<string, string>(
  accepted.body.deliveries.map((d: { channel: string; recipient: string; delivery_id: string }) => [
    `${d.channel}:${d.recipient}`,
    d.delivery_id,
  ]),
);

/** The feed row of one delivery once it is terminal (and, with `until`, once that holds too). */
async function terminal(
  channel: string,
  recipient: string,
  until: (row: any) => boolean = () => true,
): Promise<any> {
  const id = ids.get(`${channel}:${recipient}`);
  if (!id) throw new Error(`no delivery for ${channel}:${recipient}`);
  return waitFor(
    async () =>
      (await svc.feed(client, 'reference=sandbox-table')).find(
        (r) => r.delivery_id === id && r.status !== 'pending' && until(r),
      ),
    10_000,
    `${channel}:${recipient} to finish`,
  );
}

async function attemptOutcomes(deliveryId: string): Promise<string[]> {
  const { rows } = await svc.rt.db.query<{ outcome: string }>(
    'SELECT outcome FROM attempts WHERE delivery_id = $1 ORDER BY number',
    [deliveryId],
  );
  return rows.map((r) => r.outcome);
}

const failing: [string, string][] = [
  ['sms', '+15550000000'],
  ['whatsapp', '+15550000000'],
  ['email', 'fail@example.com'],
  ['push', 'fail'],
];
const flaky: [string, string][] = [
  ['sms', '+15551111111'],
  ['whatsapp', '+15551111111'],
  ['email', 'flaky@example.com'],
  ['push', 'flaky'],
];
const plain: [string, string][] = [
  ['sms', '+15551230001'],
  ['whatsapp', '+15551230002'],
  ['email', 'someone@example.com'],
  ['push', 'user-7'],
];

t.test('a recipient set up to fail fails permanently on the first attempt', async (t) => {
  for (const [channel, recipient] of failing) {
    const row = await terminal(channel, recipient);
    t.equal(row.status, 'failed', `${channel} ${recipient} is failed`);
    t.equal(row.attempts, 1, `${channel} ${recipient} took one attempt`);
    t.match(row.last_error, /^sandbox:/, `${channel} ${recipient} last_error starts with sandbox:`);
    t.equal(row.provider_message_id, null, `${channel} ${recipient} has no provider_message_id`);
    t.same(
      await attemptOutcomes(row.delivery_id),
      ['permanent'],
      `${channel} ${recipient} recorded one permanent attempt`,
    );
  }
});

t.test('a flaky recipient fails twice transiently, then is sent on attempt 3', async (t) => {
  for (const [channel, recipient] of flaky) {
    const row = await terminal(channel, recipient);
    t.equal(row.status, 'sent', `${channel} ${recipient} is sent`);
    t.equal(row.attempts, 3, `${channel} ${recipient} took three attempts`);
    t.match(
      row.provider_message_id,
      /^sandbox-/,
      `${channel} ${recipient} has a provider_message_id`,
    );
    t.equal(row.last_error, null, `${channel} ${recipient} has no last_error once sent`);
    t.same(
      await attemptOutcomes(row.delivery_id),
      ['transient', 'transient', 'sent'],
      `${channel} ${recipient} attempts: transient, transient, sent`,
    );
  }
});

t.test(
  'a whatsapp number ending 2222 is sent, then delivered and read while staying sent',
  async (t) => {
    const sent = await terminal('whatsapp', '+15552222222');
    t.equal(sent.status, 'sent');
    t.equal(sent.attempts, 1);
    const read = await terminal(
      'whatsapp',
      '+15552222222',
      (r) => r.delivered_at !== null && r.read_at !== null,
    );
    t.ok(
      Date.parse(read.read_at) - Date.parse(read.sent_at) < 2_000,
      'delivered_at and read_at are set within 2 s of sending',
    );
    t.equal(read.status, 'sent', 'status stays sent');
    t.ok(
      Date.parse(read.delivered_at) >= Date.parse(read.sent_at),
      'delivered_at is not before sent_at',
    );
    t.ok(
      Date.parse(read.read_at) >= Date.parse(read.delivered_at),
      'read_at is not before delivered_at',
    );
    const { rows } = await svc.rt.db.query<{ kind: string }>(
      'SELECT kind FROM delivery_events WHERE delivery_id = $1 ORDER BY id',
      [read.delivery_id],
    );
    t.same(
      rows.map((r) => r.kind),
      ['delivered', 'read'],
      'the handset reports went through the status-report path',
    );
  },
);

t.test('any other recipient is sent on the first attempt with a provider_message_id', async (t) => {
  for (const [channel, recipient] of plain) {
    const row = await terminal(channel, recipient);
    t.equal(row.status, 'sent', `${channel} ${recipient} is sent`);
    t.equal(row.attempts, 1, `${channel} ${recipient} took one attempt`);
    t.match(
      row.provider_message_id,
      /^sandbox-/,
      `${channel} ${recipient} has a provider_message_id`,
    );
    t.equal(row.last_error, null);
    t.ok(row.sent_at, `${channel} ${recipient} has sent_at`);
    t.equal(row.delivered_at, null, `${channel} ${recipient} is never reported delivered`);
    t.equal(row.read_at, null);
    t.same(await attemptOutcomes(row.delivery_id), ['sent']);
  }
});

t.test('each attempt restamps the row, so a feed walk sees a flaky delivery change', async (t) => {
  const r = await svc.send(client, {
    tenant: 'acme',
    event_type: 'sandbox.restamp',
    reference: 'restamp',
    messages: [
      { channel: 'sms', recipients: ['+15559991111'], content: { kind: 'rendered', body: 'hi' } },
    ],
  });
  t.equal(r.status, 202);
  const id = r.body.deliveries[0].delivery_id;
  const seen: any[] = [];
  let since: string | undefined;
  const deadline = Date.now() + 10_000;
  // Walk the feed as a caller would: updated_since set to the last updated_at seen, repeatedly.
  while (Date.now() < deadline) {
    const rows = await svc.feed(
      client,
      `reference=restamp${since ? `&updated_since=${encodeURIComponent(since)}` : ''}`,
    );
    for (const row of rows) {
      if (row.delivery_id === id) seen.push(row);
      since = row.updated_at;
    }
    if (seen.at(-1)?.status === 'sent') break;
    await new Promise((res) => setTimeout(res, 15));
  }
  t.equal(seen.at(-1)?.status, 'sent', 'the walk ends on the sent row');
  t.equal(seen.at(-1)?.attempts, 3);
  t.ok(seen.length > 1, `the row was seen ${seen.length} times`);
  for (let i = 1; i < seen.length; i++) {
    t.ok(
      seen[i].updated_at > seen[i - 1].updated_at,
      `updated_at increases: ${seen[i - 1].updated_at} < ${seen[i].updated_at}`,
    );
  }
  t.ok(
    seen.some((row) => row.status === 'pending' && row.attempts >= 1),
    'an attempt that ended in a retry was visible while pending',
  );
});

t.test(
  'a status report that overtakes the recording of its message id is still applied',
  async (t) => {
    // Providers (and the sandbox handset with handsetDelayMs 0) can report before the worker has
    // stored provider_message_id. Simulated here: the report is made first, the id recorded 150 ms
    // later.
    const r = await svc.send(client, {
      tenant: 'acme',
      event_type: 'sandbox.early',
      messages: [whatsapp(['+15551230003'])],
    });
    const id = r.body.deliveries[0].delivery_id;
    await waitFor(async () =>
      (await svc.feed(client)).find((d) => d.delivery_id === id && d.status === 'sent'),
    );
    const early = `sandbox-${randomUUID()}`;
    const reported = pluginContext(svc.rt, 'sandbox').reportStatus({
      providerMessageId: early,
      status: 'delivered',
      at: new Date(),
    });
    await new Promise((res) => setTimeout(res, 150));
    await svc.rt.db.query('UPDATE deliveries SET provider_message_id = $2 WHERE id = $1', [
      id,
      early,
    ]);
    await reported;
    const row = await waitFor(
      async () =>
        (await svc.feed(client)).find((d) => d.delivery_id === id && d.delivered_at !== null),
      3_000,
      'delivered_at',
    );
    t.equal(row.status, 'sent');
    t.equal(row.read_at, null);
  },
);
