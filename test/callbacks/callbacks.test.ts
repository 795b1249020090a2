import t from 'tap';
import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { freePort } from '@ens/local-engines';
import { jetstreamManager } from '@nats-io/jetstream';
import { CALLBACK_STREAM, isoSql, loadDelivery, SecretBox } from '@ens/core/internal';
import { postCallback } from '@ens/service-callbacks';
import {
  startRolesBeside,
  startTestService,
  smsHandoff,
  waitFor,
  type TestClient,
} from '../harness/service.ts';
import { startReceiver, type ReceivedPost } from '../harness/receiver.ts';
import { bundleEns } from '../harness/ens-bundle.ts';

/**
 * Signed callbacks: one post per terminal delivery state, exactly the spec's payload, signed over
 * the raw bytes both as X-ENS-Signature and per Standard Webhooks, retried on ENS_CALLBACK_BACKOFF
 * (two entries: three posts in all), then kept as a dead letter an operator can list and replay.
 */

const PAYLOAD_FIELDS = [
  'delivery_id',
  'reference',
  'channel',
  'recipient',
  'status',
  'attempts',
  'provider_message_id',
  'sent_at',
  'delivered_at',
  'read_at',
  'last_error',
];

// The `ens` command bundled from source: it is run three times, and tsx would cost ~2 s a start.
const [svc, runEns] = await Promise.all([
  startTestService(t, { env: { ENS_CALLBACK_BACKOFF: '50ms,50ms' } }),
  bundleEns(t),
]);
const client = await svc.createClient({ callbackSecret: true });
await svc.tenant(client, 'acme');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The header as one string (node gives string[] only for repeated headers, which would be a bug
 * here).
 */
function header(p: ReceivedPost, name: string): string {
  const v = p.headers[name];
  if (typeof v !== 'string') throw new Error(`header ${name} is ${JSON.stringify(v)}`);
  return v;
}

function hmacHex(raw: Buffer, secret: string): string {
  return createHmac('sha256', secret).update(raw).digest('hex');
}

/** Feed row of one delivery once it is terminal. */
async function terminalRow(c: TestClient, deliveryId: string): Promise<any> {
  return waitFor(
    async () =>
      (await svc.feed(c)).find((r) => r.delivery_id === deliveryId && r.status !== 'pending'),
    10_000,
    `delivery ${deliveryId} to finish`,
  );
}

async function callbackRow(
  deliveryId: string,
): Promise<
  { id: string; status: string; attempts: number; last_error: string | null } | undefined
> {
  const { rows } = await svc.rt.db.query(
    'SELECT id, status, attempts, last_error FROM callbacks WHERE delivery_id = $1',
    [deliveryId],
  );
  return rows[0];
}

interface CallbackPost {
  callback_id: string;
  number: number;
  at: string;
  http_status: number | null;
  error: string | null;
}

/** The posts of a delivery's callbacks as the console shows them, by callback id. */
async function callbackPosts(deliveryId: string): Promise<Record<string, CallbackPost[]>> {
  const d = await loadDelivery(svc.rt.db, deliveryId);
  if (!d) throw new Error(`no delivery ${deliveryId}`);
  return Object.fromEntries(
    d.callbacks.map((c) => [c.id as string, c.attempts_list as unknown as CallbackPost[]]),
  );
}

/** The rows of callback_attempts of one callback. */
async function attemptRows(callbackId: string) {
  const { rows } = await svc.rt.db.query(
    'SELECT number, http_status, error FROM callback_attempts WHERE callback_id = $1 ORDER BY number',
    [callbackId],
  );
  return rows;
}

t.test('a terminal delivery is posted once, retried after a 500 until it gets a 200', async (t) => {
  const receiver = await startReceiver(t, [500, 200]);
  const r = await svc.send(
    client,
    smsHandoff('acme', ['+15553330001'], { reference: 'cb-retry', callback_url: receiver.url }),
  );
  t.equal(r.status, 202);
  const id = r.body.deliveries[0].delivery_id;

  await waitFor(async () => receiver.posts.length >= 2, 10_000, 'the retry');
  await waitFor(
    async () => (await callbackRow(id))?.status === 'delivered',
    5_000,
    'the callback to be recorded delivered',
  );
  await sleep(300); // a further post would come within the 50 ms back-off
  t.same(
    receiver.posts.map((p) => p.answered),
    [500, 200],
    'one failed post, one retry that got 200, nothing after',
  );
  const [first, retry] = receiver.posts as [ReceivedPost, ReceivedPost];

  t.ok(first.raw.equals(retry.raw), 'the retry carries the same bytes');
  t.equal(header(first, 'content-type'), 'application/json');
  const body = JSON.parse(retry.raw.toString('utf8'));
  t.same(
    Object.keys(body),
    PAYLOAD_FIELDS,
    'the body has exactly the spec payload fields, in the spec order',
  );

  const row = await terminalRow(client, id);
  t.same(
    body,
    Object.fromEntries(PAYLOAD_FIELDS.map((f) => [f, row[f]])),
    'the body matches the feed row',
  );
  t.match(body, {
    delivery_id: id,
    reference: 'cb-retry',
    channel: 'sms',
    recipient: '+15553330001',
    status: 'sent',
    attempts: 1,
    last_error: null,
  });
  t.match(body.provider_message_id, /^sandbox-/);

  const cb = await callbackRow(id);
  t.match(cb, { status: 'delivered', attempts: 2, last_error: null });
  t.equal(
    cb?.id,
    id,
    'the delivery’s first callback is keyed by the delivery’s id (migration 022)',
  );
  const stored = (
    await svc.rt.db.query<{ body: string | null; snapshot: string | null; url: string | null }>(
      'SELECT body, snapshot, url FROM callbacks WHERE id = $1',
      [cb!.id],
    )
  ).rows[0]!;
  t.same(
    { body: stored.body, snapshot: JSON.parse(stored.snapshot ?? 'null'), url: stored.url },
    {
      body: null,
      snapshot: ['sent', 1, body.provider_message_id, body.sent_at, null, null, null],
      url: null,
    },
    'the callback keeps only its payload’s changing fields; the rest is its delivery’s, and its ' +
      'URL its handoff’s (migrations 019, 021), where both posts went',
  );
  t.same(
    (await callbackPosts(id))[cb!.id]?.map(({ number, http_status }) => ({ number, http_status })),
    [
      { number: 1, http_status: 500 },
      { number: 2, http_status: 200 },
    ],
    'both posts are recorded',
  );

  t.test(
    'X-ENS-Signature is the hex HMAC-SHA256 of the raw body keyed with the callback secret',
    async (t) => {
      for (const p of [first, retry])
        t.equal(header(p, 'x-ens-signature'), hmacHex(p.raw, client.callbackSecret!));
      t.match(
        client.callbackSecret,
        /^whsec_[A-Za-z0-9+/]+=*$/,
        'the secret is issued in the Standard Webhooks form',
      );
    },
  );

  t.test(
    'Standard Webhooks headers: a stable webhook-id, integer-second timestamps, a verifying ' +
      'signature',
    async (t) => {
      t.equal(
        header(first, 'webhook-id'),
        header(retry, 'webhook-id'),
        'webhook-id is the same on the retry',
      );
      t.ok(header(first, 'webhook-id').length > 0);
      const wh = new Webhook(client.callbackSecret!);
      for (const p of [first, retry]) {
        const ts = header(p, 'webhook-timestamp');
        t.match(ts, /^\d+$/, 'webhook-timestamp is integer seconds');
        t.ok(Math.abs(Number(ts) - p.at / 1000) < 5, 'webhook-timestamp is the time of this post');
        t.match(header(p, 'webhook-signature'), /^v1,[A-Za-z0-9+/]+=*$/);
        const headers = {
          'webhook-id': header(p, 'webhook-id'),
          'webhook-timestamp': ts,
          'webhook-signature': header(p, 'webhook-signature'),
        };
        t.same(wh.verify(p.raw, headers), body, 'the standardwebhooks library verifies the post');
      }
      const forged = {
        'webhook-id': header(retry, 'webhook-id'),
        'webhook-timestamp': header(retry, 'webhook-timestamp'),
        'webhook-signature': header(retry, 'webhook-signature'),
      };
      t.throws(
        () =>
          wh.verify(Buffer.from(retry.raw.toString('utf8').replace('"sent"', '"failed"')), forged),
        'a tampered body does not verify',
      );
    },
  );
});

t.test(
  'a successful post is recorded in its callbacks row, not in callback_attempts; the console ' +
    'still lists every post (issue 27)',
  async (t) => {
    const [ok, flaky] = await Promise.all([startReceiver(t, [200]), startReceiver(t, [500, 200])]);
    const sent = await Promise.all(
      [ok, flaky].map((r, i) =>
        svc.send(client, smsHandoff('acme', [`+1555333004${i}`], { callback_url: r.url })),
      ),
    );
    const [first, second] = sent.map((r) => r.body.deliveries[0].delivery_id as string) as [
      string,
      string,
    ];
    const delivered = (id: string) =>
      waitFor(
        async () => {
          const { rows } = await svc.rt.db.query(
            `SELECT id::text, attempts, last_http_status, ${isoSql('updated_at')} AS updated_at
               FROM callbacks WHERE delivery_id = $1 AND status = 'delivered'`,
            [id],
          );
          return rows[0] as
            | { id: string; attempts: number; last_http_status: number | null; updated_at: string }
            | undefined;
        },
        10_000,
        `the callback of ${id} to be recorded delivered`,
      );

    t.test('posted at its first try: no callback_attempts row', async (t) => {
      const cb = await delivered(first);
      t.match(cb, { attempts: 1, last_http_status: 200 }, 'the row says which post and its answer');
      t.same(await attemptRows(cb.id), [], 'callback_attempts has no row for it');
      const posts = (await callbackPosts(first))[cb.id]!;
      t.same(
        posts,
        [{ callback_id: cb.id, number: 1, at: cb.updated_at, http_status: 200, error: null }],
        'the console lists the post, its number, time and HTTP status',
      );
      const postedAt = ok.posts[0]!.at;
      const recordedAt = Date.parse(posts[0]!.at);
      t.ok(
        recordedAt >= postedAt - 50 && recordedAt - postedAt < 5_000,
        `its time is the post's (${recordedAt - postedAt} ms after the receiver got it)`,
      );

      // As a callback delivered before migration 018 is: its post in callback_attempts, no status
      // in the row. The console lists it once.
      await svc.rt.db.query('UPDATE callbacks SET last_http_status = NULL WHERE id = $1', [cb.id]);
      await svc.rt.db.query(
        `INSERT INTO callback_attempts (callback_id, number, at, http_status)
         SELECT id, attempts, updated_at, 200 FROM callbacks WHERE id = $1`,
        [cb.id],
      );
      t.same(
        (await callbackPosts(first))[cb.id],
        posts,
        'a post recorded in callback_attempts (before the migration) is listed once',
      );
    });

    t.test('failed once, then posted: the failure in callback_attempts, both listed', async (t) => {
      const cb = await delivered(second);
      t.match(cb, { attempts: 2, last_http_status: 200 });
      t.same(
        await attemptRows(cb.id),
        [{ number: 1, http_status: 500, error: 'HTTP 500' }],
        'callback_attempts has the failed post only',
      );
      const posts = (await callbackPosts(second))[cb.id]!;
      t.match(
        posts,
        [
          { callback_id: cb.id, number: 1, http_status: 500, error: 'HTTP 500' },
          { callback_id: cb.id, number: 2, at: cb.updated_at, http_status: 200, error: null },
        ],
        'the console lists both posts, in order',
      );
      t.equal(posts.length, 2);
      t.ok(posts[0]!.at < posts[1]!.at, 'the failure before the success');
    });
  },
);

t.test(
  'with every role in one process a callback is posted with no wake-up through NATS; a retry gets one',
  async (t) => {
    // The outcome claims the callback for this process's callbacks role and hands it over
    // (DeliveryStore.postCallbacksHere): no wake-up is published and no claim statement runs.
    const jsm = await jetstreamManager(svc.rt.nc);
    const published = async () => (await jsm.streams.info(CALLBACK_STREAM)).state.last_seq;
    const before = await published();
    const ok = await startReceiver(t);
    const phones = ['+15553340001', '+15553340002', '+15553340003'];
    const r = await svc.send(client, smsHandoff('acme', phones, { callback_url: ok.url }));
    t.equal(r.status, 202);
    await waitFor(async () => ok.posts.length >= 3, 10_000, 'the three posts');
    for (const d of r.body.deliveries)
      await waitFor(
        async () => (await callbackRow(d.delivery_id))?.status === 'delivered',
        5_000,
        'each callback recorded delivered',
      );
    t.equal(await published(), before, 'no callback wake-up was published');
    t.same(
      await Promise.all(
        r.body.deliveries.map(async (d: any) => (await callbackRow(d.delivery_id))?.attempts),
      ),
      [1, 1, 1],
      'each posted once, as attempt 1',
    );

    // A refused post's retry is due later: its record wakes it through NATS, once.
    const flaky = await startReceiver(t, [500, 200]);
    const again = await svc.send(
      client,
      smsHandoff('acme', ['+15553340004'], { callback_url: flaky.url }),
    );
    const id = again.body.deliveries[0].delivery_id;
    await waitFor(
      async () => (await callbackRow(id))?.status === 'delivered',
      10_000,
      'the retried callback recorded delivered',
    );
    t.same(
      flaky.posts.map((p) => p.answered),
      [500, 200],
    );
    t.equal(await published(), before + 1, 'one wake-up, for the retry');
  },
);

t.test('both terminal states post; the failed one carries last_error', async (t) => {
  const receiver = await startReceiver(t, [200]);
  const r = await svc.send(
    client,
    smsHandoff('acme', ['+15553330002', '+15553330000'], {
      reference: 'cb-both',
      callback_url: receiver.url,
    }),
  );
  t.equal(r.status, 202);
  await waitFor(async () => receiver.posts.length >= 2, 10_000, 'two posts');
  await sleep(300);
  t.equal(receiver.posts.length, 2, 'one post per terminal delivery');
  const bodies = receiver.posts.map((p) => JSON.parse(p.raw.toString('utf8')));
  const sent = bodies.find((b) => b.recipient === '+15553330002');
  const failed = bodies.find((b) => b.recipient === '+15553330000');
  t.match(sent, { status: 'sent', attempts: 1, last_error: null });
  t.match(failed, { status: 'failed', attempts: 1, provider_message_id: null, sent_at: null });
  t.match(failed.last_error, /^sandbox:/, 'the failed post carries the provider reason');
  for (const b of bodies) t.same(Object.keys(b), PAYLOAD_FIELDS);
  for (const p of receiver.posts)
    t.equal(header(p, 'x-ens-signature'), hmacHex(p.raw, client.callbackSecret!));
});

t.test('pending states never post: a flaky delivery posts once, after it is sent', async (t) => {
  const receiver = await startReceiver(t, [200]);
  const r = await svc.send(
    client,
    smsHandoff('acme', ['+15553331111'], { callback_url: receiver.url }),
  );
  const id = r.body.deliveries[0].delivery_id;
  const row = await terminalRow(client, id);
  await waitFor(async () => receiver.posts.length >= 1, 5_000, 'the post');
  await sleep(300);
  t.equal(receiver.posts.length, 1, 'two retries, one post');
  t.match(JSON.parse(receiver.posts[0]!.raw.toString('utf8')), {
    delivery_id: id,
    status: 'sent',
    attempts: 3,
  });
  t.equal(row.attempts, 3);
});

t.test('whatsapp delivered and read reports do not post again', async (t) => {
  const receiver = await startReceiver(t, [200]);
  const r = await svc.send(client, {
    tenant: 'acme',
    event_type: 'test.event',
    callback_url: receiver.url,
    messages: [
      {
        channel: 'whatsapp',
        recipients: ['+15553332222'],
        content: { kind: 'template', template_name: 't', language: 'en', body_params: [] },
      },
    ],
  });
  const id = r.body.deliveries[0].delivery_id;
  await waitFor(
    async () => (await svc.feed(client)).find((d) => d.delivery_id === id && d.read_at !== null),
    5_000,
    'the read report',
  );
  await sleep(300);
  t.equal(receiver.posts.length, 1, 'only the sent state posted');
  t.match(JSON.parse(receiver.posts[0]!.raw.toString('utf8')), {
    status: 'sent',
    delivered_at: null,
    read_at: null,
  });
});

t.test('a client without a callback secret gets no posts at all', async (t) => {
  const silent = await svc.createClient({ callbackSecret: false });
  t.equal(silent.callbackSecret, undefined);
  await svc.tenant(silent, 'acme');
  const receiver = await startReceiver(t, [200]);
  const r = await svc.send(
    silent,
    smsHandoff('acme', ['+15553330003', '+15553330000'], { callback_url: receiver.url }),
  );
  t.equal(r.status, 202);
  for (const d of r.body.deliveries) await terminalRow(silent, d.delivery_id);
  await sleep(1_500);
  t.equal(receiver.posts.length, 0, 'nothing was posted');
  const { rows } = await svc.rt.db.query(
    'SELECT count(*)::int AS n FROM callbacks WHERE client_id = $1',
    [silent.clientId],
  );
  t.equal(rows[0].n, 0, 'no callback was queued');
});

t.test(
  'a receiver that keeps failing leaves a dead letter that an operator lists and replays',
  async (t) => {
    const other = await svc.createClient({ callbackSecret: true });
    await svc.tenant(other, 'acme');
    const script = [500];
    const receiver = await startReceiver(t, script);
    const r = await svc.send(
      other,
      smsHandoff('acme', ['+15553330004', '+15553330005'], { callback_url: receiver.url }),
    );
    const [a, b] = r.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id) as [
      string,
      string,
    ];
    await waitFor(
      async () =>
        (await callbackRow(a))?.status === 'dead' && (await callbackRow(b))?.status === 'dead',
      10_000,
      'two dead letters',
    );
    await sleep(200);
    const postsFor = (id: string) =>
      receiver.posts.filter((p) => JSON.parse(p.raw.toString('utf8')).delivery_id === id);
    t.equal(postsFor(a).length, 3, 'three posts: the first and one per back-off entry');
    t.equal(postsFor(b).length, 3);
    const cbA = (await callbackRow(a))!;
    const cbB = (await callbackRow(b))!;
    t.match(cbA, { status: 'dead', attempts: 3, last_error: 'HTTP 500' });

    const listed = await runEns(['callbacks', 'dead-letters'], svc.env);
    t.equal(listed.code, 0, listed.stderr);
    const letters = JSON.parse(listed.stdout); // throws unless stdout is one JSON document
    t.same(
      letters.map((l: { id: string }) => l.id).sort(),
      [cbA.id, cbB.id].sort(),
      'dead-letters lists both',
    );
    t.match(
      letters.find((l: { id: string }) => l.id === cbA.id),
      {
        delivery_id: a,
        client_id: other.clientId,
        url: receiver.url,
        attempts: 3,
        last_error: 'HTTP 500',
      },
    );

    script.splice(0, script.length, 200); // the receiver is fixed
    const byId = await runEns(['callbacks', 'replay', cbA.id], svc.env);
    t.equal(byId.code, 0, byId.stderr);
    t.same(JSON.parse(byId.stdout), { replayed: [cbA.id] });
    await waitFor(
      async () => (await callbackRow(a))?.status === 'delivered',
      10_000,
      'the replayed callback to be delivered',
    );
    t.equal(postsFor(a).length, 4, 'the replay posted once more');
    const replayed = postsFor(a)[3]!;
    t.equal(replayed.answered, 200);
    t.ok(replayed.raw.equals(postsFor(a)[0]!.raw), 'the replay posts the same bytes');
    t.equal(
      header(replayed, 'webhook-id'),
      header(postsFor(a)[0]!, 'webhook-id'),
      'with the same webhook-id',
    );
    t.equal(header(replayed, 'x-ens-signature'), hmacHex(replayed.raw, other.callbackSecret!));
    t.equal((await callbackRow(b))?.status, 'dead', 'replaying one id leaves the other dead');

    const byClient = await runEns(['callbacks', 'replay', '--client', other.clientId], svc.env);
    t.equal(byClient.code, 0, byClient.stderr);
    t.same(JSON.parse(byClient.stdout), { replayed: [cbB.id] });
    await waitFor(
      async () => (await callbackRow(b))?.status === 'delivered',
      10_000,
      'the client replay to be delivered',
    );
    t.equal(postsFor(b).length, 4);
    const { rows } = await svc.rt.db.query(
      `SELECT count(*)::int AS n FROM callbacks WHERE status = 'dead'`,
    );
    t.equal(rows[0].n, 0, 'no dead letters are left');
  },
);

t.test(
  'a callback secret sealed under another master key becomes a dead letter, not an endless retry',
  async (t) => {
    // As when `ens clients issue-callback-secret` ran with another ENS_DATA_DIR and no
    // ENS_MASTER_KEY.
    const c = await svc.createClient({ callbackSecret: false });
    await svc.tenant(c, 'acme');
    const foreign = new SecretBox(randomBytes(32)).seal(
      `whsec_${randomBytes(32).toString('base64')}`,
    );
    await svc.rt.db.query('UPDATE clients SET callback_secret_enc = $2 WHERE id = $1', [
      c.clientId,
      foreign,
    ]);
    const receiver = await startReceiver(t, [200]);
    const r = await svc.send(
      c,
      smsHandoff('acme', ['+15553330007'], { callback_url: receiver.url }),
    );
    const id = r.body.deliveries[0].delivery_id;
    const cb = await waitFor(
      async () => {
        const row = await callbackRow(id);
        return row?.status === 'dead' ? row : undefined;
      },
      5_000,
      'the dead letter',
    );
    t.equal(cb.attempts, 1, 'given up on the first try');
    t.match(cb.last_error, /master key/, 'last_error says why');
    t.equal(receiver.posts.length, 0, 'nothing unsigned or wrongly signed was posted');
  },
);

t.test(
  'private callback targets are refused unless ENS_ALLOW_PRIVATE_CALLBACKS=true',
  async (t) => {
    t.test('at send time: a loopback callback_url gets 400', async (t) => {
      // A second API on the same engines, configured as production is (private targets refused).
      const port = await freePort();
      await startRolesBeside(t, svc, ['api'], {
        ENS_ALLOW_PRIVATE_CALLBACKS: 'false',
        PORT: String(port),
      });
      const res = await fetch(`http://127.0.0.1:${port}/v2/messages`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${await client.token()}`,
          'content-type': 'application/json',
          'idempotency-key': 'private-target',
        },
        body: JSON.stringify(
          smsHandoff('acme', ['+15553330006'], { callback_url: 'http://127.0.0.1:9/hook' }),
        ),
      });
      t.equal(res.status, 400);
    });

    t.test(
      'at post time: a name that resolves to a private address is refused after DNS',
      async (t) => {
        const out = await postCallback({
          url: 'http://hooks.example.com/ens',
          rawBody: Buffer.from('{}'),
          headers: {},
          timeoutMs: 2_000,
          allowPrivate: false,
          lookup: async () => [{ address: '10.1.2.3', family: 4 }],
        });
        t.match(out, { outcome: 'failed', error: /resolves to 10\.1\.2\.3/ });
        const mixed = await postCallback({
          url: 'http://hooks.example.com/ens',
          rawBody: Buffer.from('{}'),
          headers: {},
          timeoutMs: 2_000,
          allowPrivate: false,
          lookup: async () => [
            { address: '93.184.216.34', family: 4 },
            { address: '127.0.0.1', family: 4 },
          ],
        });
        t.match(
          mixed,
          { outcome: 'failed', error: /127\.0\.0\.1/ },
          'one private address among public ones is enough to refuse',
        );
      },
    );
  },
);
