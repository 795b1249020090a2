import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { collectIfUnused, collectUnusedMedia, recordMediaPuts } from '@ens/core/internal';
import { mediaKey } from '@ens/core';
import { startS3Server, useS3Credentials } from '../harness/s3-server.ts';
import { startTestService, uniqueKey } from '../harness/service.ts';

/**
 * Media no pending delivery uses is collected, on the directory store and on an S3-compatible
 * bucket: images of deliveries that have ended, and objects no accepted request refers to (a
 * request refused after its files were written, an accept that crashed). An object a pending
 * delivery uses, or one written within ENS_MEDIA_GRACE (an accept may still be in flight), stays.
 * Only the api role runs, so deliveries stay pending until the test ends them.
 */

const email = (image: Buffer) => ({
  tenant: 'acme',
  event_type: 'report.ready',
  messages: [
    {
      channel: 'email',
      recipients: ['a@example.com', 'b@example.com'],
      content: {
        kind: 'rendered',
        subject: 's',
        body: 'b',
        html: '<img src="cid:logo">',
        inline_images: [{ cid: 'logo', media_type: 'image/png', data: image.toString('base64') }],
      },
    },
    {
      channel: 'sms',
      recipients: ['+15551230000'],
      content: { kind: 'rendered', body: 'see your email' },
    },
  ],
});

async function collection(t: Test, env: Record<string, string>) {
  const svc = await startTestService(t, { roles: ['api'], env });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const { db, media, logger } = svc.rt;
  const stored = async () => {
    const keys: string[] = [];
    for await (const o of media.list()) keys.push(o.key);
    return [...new Set(keys)].sort();
  };
  const collectNow = () => collectUnusedMedia({ db, media, logger }, 0).run();

  const image = randomBytes(64 * 1024);
  const key = mediaKey(image);
  const r = await svc.send(client, email(image), uniqueKey());
  t.equal(r.status, 202, r.text);
  t.same(await stored(), [key], 'the accepted image is stored');
  const refs = await db.query('SELECT delivery_id FROM media_refs WHERE storage_key = $1', [key]);
  t.equal(refs.rowCount, 2, 'both email deliveries refer to it, the sms delivery does not');

  const orphan = randomBytes(1024);
  const orphanKey = await media.put(orphan, 'image/png');
  await collectNow();
  t.same(
    await stored(),
    [key],
    'an object nothing refers to is removed; the one pending deliveries use stays',
  );

  const [first, second] = refs.rows.map((row) => row.delivery_id as string);
  await db.query(`UPDATE deliveries SET status = 'sent' WHERE id = $1`, [first]);
  await collectNow();
  t.same(await stored(), [key], 'it stays while one of its deliveries is pending');
  await db.query(`UPDATE deliveries SET status = 'failed' WHERE id = $1`, [second]);

  // An accept in flight has recorded its put: the object stays until the grace has passed.
  await recordMediaPuts(db, [key]);
  t.notOk(
    await collectIfUnused(db, media, key, new Date(0), 60_000),
    'not within the grace after its last write',
  );
  t.same(await stored(), [key]);
  t.ok(
    await collectIfUnused(db, media, key, new Date(0), 0),
    'collected once the grace has passed',
  );
  t.same(await stored(), [], 'the object is gone');
  await t.rejects(media.get(key), 'reading it fails');
  t.equal(
    (await db.query('SELECT 1 FROM media_objects WHERE storage_key = ANY ($1)', [[key, orphanKey]]))
      .rowCount,
    0,
    'and its record',
  );

  // The same image sent again is written again, and the new delivery reads it.
  const again = await svc.send(client, email(image), uniqueKey());
  t.equal(again.status, 202, again.text);
  t.same(await stored(), [key], 'written again by the next accept');
  t.ok((await media.get(key)).bytes.equals(image), 'with the same bytes');
}

t.test('directory store', (t) => collection(t, {}));

t.test('S3 store', async (t) => {
  const s3 = await startS3Server(t, { bucket: 'ens-media-gc' });
  useS3Credentials(t, s3);
  await collection(t, {
    ENS_MEDIA_STORE: 's3',
    ENS_S3_BUCKET: s3.bucket,
    ENS_S3_ENDPOINT: s3.endpoint,
    ENS_S3_FORCE_PATH_STYLE: 'true',
    ENS_S3_PREFIX: 'ens/media',
  });
  t.ok(
    s3.requests.some((r) => r.method === 'DELETE' && r.status === 204),
    'objects were removed with DeleteObject',
  );
});
