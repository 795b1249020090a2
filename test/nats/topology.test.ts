import t from 'tap';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import {
  CALLBACK_CONSUMER,
  CALLBACK_STREAM,
  ensureTopology,
  SEND_STREAM,
} from '@ens/core/internal';
import { startTestEngines } from '../harness/engines.ts';

/**
 * Streams that exist with other settings are not left as they are: subjects and replicas are
 * updated to ENS's, and a stream that cannot be (another retention) stops the start with a
 * configuration error that says what to do.
 */
t.test('existing streams', async (t) => {
  const engines = await startTestEngines(t);
  const nc = await connect({ servers: engines.natsUrl });
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc);

  await jsm.streams.add({
    name: SEND_STREAM,
    subjects: ['ens.send.sms'],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
  });
  await ensureTopology(nc);
  t.same(
    (await jsm.streams.info(SEND_STREAM)).config.subjects.sort(),
    ['email', 'push', 'sms', 'whatsapp']
      .flatMap((c) => [`ens.send.${c}`, `ens.send.${c}.bulk`])
      .sort(),
    'missing subjects were added, both lanes of every channel',
  );
  const consumers: string[] = [];
  for await (const c of jsm.consumers.list(SEND_STREAM)) consumers.push(c.name);
  t.same(
    consumers.sort(),
    ['email', 'push', 'sms', 'whatsapp'].flatMap((c) => [`worker-${c}`, `worker-${c}-bulk`]).sort(),
    'a consumer for each lane',
  );

  // A callbacks consumer made before, with 10,000 unacknowledged allowed: wake-ups waiting for a
  // retry counted against it, so it is raised (see test/callbacks/slow-receiver.test.ts).
  await jsm.consumers.update(CALLBACK_STREAM, CALLBACK_CONSUMER, { max_ack_pending: 10_000 });
  await ensureTopology(nc);
  t.equal(
    (await jsm.consumers.info(CALLBACK_STREAM, CALLBACK_CONSUMER)).config.max_ack_pending,
    1_000_000,
    'the callbacks consumer allows a million waiting',
  );

  await jsm.streams.delete(CALLBACK_STREAM);
  await jsm.streams.add({
    name: CALLBACK_STREAM,
    subjects: ['ens.callbacks.post'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
  });
  await t.rejects(
    ensureTopology(nc),
    { code: 'ENS_ERR_CONFIG', message: /ENS_CALLBACKS.*retention "limits".*Delete the stream/ },
    'another retention is a configuration error naming the fix',
  );

  await jsm.streams.delete(CALLBACK_STREAM);
  const err = await ensureTopology(nc, 3).then(
    () => null,
    (e: Error) => e,
  );
  t.match(
    String(err?.message),
    /replicas|cluster/i,
    'replicas 3 on a single server is refused by the server, not ignored',
  );
});
