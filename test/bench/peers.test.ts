/**
 * The bench's peers are only a fair comparison if they really do the work they are credited with:
 * each queue peer must record one committed outcome row per recipient, and the Fastify + pg
 * service one row per request, refusing a malformed body. Real PostgreSQL (and the machine's Redis
 * for BullMQ, skipped when there is none, as the bench skips it).
 */
import t, { type Test } from 'tap';
import pg from 'pg';
import { startTestEngines } from '../harness/engines.ts';
import { handoffBody, phone } from './http.ts';
import { peerPipeline } from './peers/measure.ts';
import { obliterateQueue, probeRedis } from './peers/redis.ts';
import { createPeersDatabase, resetPeerSchema } from './peers/schema.ts';
import { startPeer, type PeerKind } from './peers/spawn.ts';

const engines = await startTestEngines(t);
const url = await createPeersDatabase(engines.databaseUrl);
const db = new pg.Pool({ connectionString: url, max: 2 });
// The engines stop at teardown too, possibly first: an idle connection closed by that is no
// failure.
db.on('error', () => {});
t.teardown(() => db.end());

const post = (baseUrl: string, body: string) =>
  fetch(`${baseUrl}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });

t.test('Fastify + pg: one row per accepted request, 400 for a body ENS would refuse', async (t) => {
  await resetPeerSchema(db, 'fastify_pg', 'messages');
  const peer = await startPeer('fastify-pg', 'fastify-pg', {
    PEER_DATABASE_URL: url,
    PEER_SCHEMA: 'fastify_pg',
    PEER_PG_POOL: '2',
  });
  t.teardown(() => peer.stop());
  const ok = await post(peer.baseUrl, handoffBody([phone(0)]));
  t.equal(ok.status, 202);
  t.same(await ok.json(), { accepted: 1 });
  const bad = await post(
    peer.baseUrl,
    JSON.stringify({
      tenant: 'bench',
      event_type: 'x',
      messages: [{ channel: 'sms', recipients: [], content: { kind: 'rendered', body: 'hi' } }],
    }),
  );
  t.equal(bad.status, 400, 'no recipients');
  const { rows } = await db.query<{ recipients: string[] }>(
    'SELECT recipients FROM fastify_pg.messages',
  );
  t.same(
    rows,
    [{ recipients: [phone(0)] }],
    'the accepted request, and nothing for the refused one',
  );
});

async function checkQueuePeer(
  t: Test,
  kind: PeerKind,
  name: string,
  env: Record<string, string>,
): Promise<void> {
  const schema = name.replace(/-/g, '_');
  await resetPeerSchema(db, schema, 'outcomes');
  const peer = await startPeer(kind, name, {
    PEER_DATABASE_URL: url,
    PEER_SCHEMA: schema,
    PEER_PG_POOL: '4',
    ...env,
  });
  t.teardown(() => peer.stop());
  // Two requests of three recipients: resolves once all six outcome rows are committed.
  const r = await peerPipeline(peer.baseUrl, db, schema, 2, 3);
  t.equal(r.n, 6);
  const { rows } = await db.query<{
    recipient: string;
    status: string;
    provider_message_id: string;
  }>(`SELECT recipient, status, provider_message_id FROM ${schema}.outcomes ORDER BY recipient`);
  t.same(
    rows.map((x) => x.recipient),
    Array.from({ length: 6 }, (_, i) => phone(i)).sort(),
    'one outcome per recipient, none twice',
  );
  t.ok(
    rows.every((x) => x.status === 'sent' && x.provider_message_id.startsWith('sandbox-')),
    'each sent through the no-op provider',
  );
  const bad = await post(peer.baseUrl, JSON.stringify({ tenant: 'bench' }));
  t.equal(bad.status, 400, 'a body without messages is refused');
}

t.test('graphile-worker, defaults: one committed outcome per recipient', (t) =>
  checkQueuePeer(t, 'graphile-worker', 'graphile-worker', { PEER_CONCURRENCY: '4' }),
);
t.test('graphile-worker, batched: one committed outcome per recipient', (t) =>
  checkQueuePeer(t, 'graphile-worker', 'graphile-worker-batched', {
    PEER_CONCURRENCY: '4',
    PEER_BATCHED: '1',
  }),
);

const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = await probeRedis(redisUrl);
t.test(
  'BullMQ: one committed outcome per recipient',
  { skip: 'error' in redis ? `no Redis at ${redisUrl}: ${redis.error}` : false },
  async (t) => {
    const queue = `ens-peers-test-${process.pid}`;
    t.teardown(() => obliterateQueue(redisUrl, queue));
    await checkQueuePeer(t, 'bullmq', 'bullmq', {
      PEER_CONCURRENCY: '8',
      PEER_REDIS_URL: redisUrl,
      PEER_QUEUE: queue,
    });
  },
);
