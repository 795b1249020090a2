import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import t from 'tap';
import { DirectoryMediaStore } from '../src/media/directory-store.ts';
import {
  MediaNotFoundError,
  S3MediaStore,
  S3MediaStoreError,
  type S3MediaStoreOptions,
} from '../src/media/s3-store.ts';
import { startS3Server, type TestS3Server } from '../../../test/harness/s3-server.ts';

// The SDK warns once per process that its 2027 releases will need Node 22; not this test's concern.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
const sha = (b: Buffer) => `sha256-${createHash('sha256').update(b).digest('hex')}`;

const s3 = await startS3Server(t);

function storeFor(server: TestS3Server, over: Partial<S3MediaStoreOptions> = {}): S3MediaStore {
  const store = new S3MediaStore({
    bucket: server.bucket,
    region: server.region,
    endpoint: server.endpoint,
    forcePathStyle: true,
    credentials: server.credentials,
    ...over,
  });
  t.teardown(() => store.close());
  return store;
}

/** The bucket's object keys under a prefix, read with a plain client (not the store under test). */
async function listKeys(server: TestS3Server, prefix = ''): Promise<string[]> {
  const client = new S3Client({
    region: server.region,
    endpoint: server.endpoint,
    forcePathStyle: true,
    credentials: server.credentials,
  });
  try {
    const out = await client.send(
      new ListObjectsV2Command({ Bucket: server.bucket, Prefix: prefix }),
    );
    return (out.Contents ?? []).map((o) => o.Key ?? '').sort();
  } finally {
    client.destroy();
  }
}

const since = (server: TestS3Server, n: number) =>
  server.requests.slice(n).map((r) => `${r.method} ${r.status}`);

t.test(
  'round trip: the bytes and media type come back under a content-addressed key',
  async (t) => {
    const store = storeFor(s3, { prefix: 'round-trip' });
    const key = await store.put(PNG, 'image/png');
    t.equal(key, sha(PNG));
    t.same(
      await listKeys(s3, 'round-trip/'),
      [`round-trip/${key.slice(7, 9)}/${key}`],
      'laid out like the directory store, under the prefix',
    );
    const got = await store.get(key);
    t.ok(got.bytes.equals(PNG), 'same bytes');
    t.equal(got.mediaType, 'image/png');
  },
);

t.test('a key means the same bytes on both backends', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ens-media-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const bytes = randomBytes(2048);
  const viaDirectory = await new DirectoryMediaStore(dir).put(bytes, 'image/gif');
  const viaS3 = await storeFor(s3, { prefix: 'compat' }).put(bytes, 'image/gif');
  t.equal(viaS3, viaDirectory);
});

t.test('the same bytes twice: one key, one object, one upload', async (t) => {
  const store = storeFor(s3, { prefix: 'twice' });
  const bytes = randomBytes(4096);
  const mark = s3.requests.length;
  const first = await store.put(bytes, 'image/jpeg');
  const second = await store.put(bytes, 'image/jpeg');
  t.equal(second, first);
  t.same(await listKeys(s3, 'twice/'), [`twice/${first.slice(7, 9)}/${first}`], 'one object');
  t.same(
    since(s3, mark).slice(0, 3),
    ['HEAD 404', 'PUT 200', 'HEAD 200'],
    'the second put only asked whether the object exists',
  );
  t.ok((await store.get(first)).bytes.equals(bytes));
});

t.test('concurrent puts of the same new bytes are harmless', async (t) => {
  const store = storeFor(s3, { prefix: 'race' });
  const bytes = randomBytes(1000);
  const keys = await Promise.all([1, 2, 3, 4].map(() => store.put(bytes, 'image/png')));
  t.same(new Set(keys), new Set([sha(bytes)]));
  t.equal((await listKeys(s3, 'race/')).length, 1);
  t.ok((await store.get(sha(bytes))).bytes.equals(bytes));
});

t.test('binary safety: 1 MiB of random bytes', async (t) => {
  const store = storeFor(s3);
  const bytes = randomBytes(1024 * 1024);
  const key = await store.put(bytes, 'application/octet-stream');
  const got = await store.get(key);
  t.equal(got.bytes.length, bytes.length);
  t.ok(got.bytes.equals(bytes), 'every byte comes back');
  t.equal(got.mediaType, 'application/octet-stream');
});

t.test('prefix slashes are normalised', async (t) => {
  const key = await storeFor(s3, { prefix: '/ens/media/' }).put(PNG, 'image/png');
  t.same(await listKeys(s3, 'ens/'), [`ens/media/${key.slice(7, 9)}/${key}`]);
  t.ok(
    (await storeFor(s3, { prefix: 'ens/media' }).get(key)).bytes.equals(PNG),
    'the same objects with or without slashes',
  );
});

t.test('a missing key is told apart from a failure', async (t) => {
  const store = storeFor(s3);
  const key = sha(Buffer.from('never stored'));
  const err = await store.get(key).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(err, MediaNotFoundError);
  t.equal(
    (err as MediaNotFoundError).code,
    'ENOENT',
    'the code a missing file has in the directory store',
  );
  t.equal((err as MediaNotFoundError).key, key);
  t.match(
    (err as Error).message,
    new RegExp(
      `media not found: ${key} \\(s3://ens-media/${key.slice(7, 9)}/${key} at http://127\\.0\\.0\\.1:\\d+\\)`,
    ),
  );

  const dir = await mkdtemp(join(tmpdir(), 'ens-media-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await t.rejects(
    new DirectoryMediaStore(dir).get(key),
    { code: 'ENOENT' },
    'the directory store answers with the same code',
  );
});

t.test('something that is not a media key is refused before asking S3', async (t) => {
  const store = storeFor(s3);
  const mark = s3.requests.length;
  await t.rejects(store.get('../etc/passwd'), { message: 'not a media key: ../etc/passwd' });
  await t.rejects(store.get(`sha256-${'A'.repeat(64)}`), { message: /not a media key/ });
  t.equal(s3.requests.length, mark, 'no request sent');
});

t.test('an object whose bytes do not match its key is refused', async (t) => {
  const store = storeFor(s3, { prefix: 'tampered' });
  const key = sha(Buffer.from('the real image'));
  const client = new S3Client({
    region: s3.region,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: s3.credentials,
  });
  t.teardown(() => client.destroy());
  await client.send(
    new PutObjectCommand({
      Bucket: s3.bucket,
      Key: `tampered/${key.slice(7, 9)}/${key}`,
      Body: Buffer.from('something else'),
      ContentType: 'image/png',
    }),
  );
  await t.rejects(store.get(key), {
    name: 'S3MediaStoreError',
    message: /s3:\/\/ens-media\/tampered\/.*: the object's bytes do not match its key/,
  });
});

t.test('check() passes when the bucket answers', async (t) => {
  await t.resolves(storeFor(s3).check());
  const mark = s3.requests.length;
  await t.resolves(
    storeFor(s3, { forcePathStyle: false }).check(),
    'the SDK addresses an IP endpoint path-style by itself',
  );
  t.match(s3.requests[mark], { method: 'HEAD', url: '/ens-media/', status: 200 });
});

t.test('a wrong bucket: every call names the bucket and says it does not exist', async (t) => {
  const store = storeFor(s3, { bucket: 'no-such-bucket' });
  await t.rejects(store.check(), {
    name: 'S3MediaStoreError',
    s3Code: 'NoSuchBucket',
    httpStatus: 404,
    bucket: 'no-such-bucket',
    message:
      /^S3 HeadBucket s3:\/\/no-such-bucket at http:\/\/127\.0\.0\.1:\d+ failed: NoSuchBucket \(HTTP 404\)$/,
  });
  await t.rejects(store.put(PNG, 'image/png'), {
    s3Code: 'NoSuchBucket',
    message:
      /^S3 PutObject s3:\/\/no-such-bucket\/[0-9a-f]{2}\/sha256-[0-9a-f]{64} at .* failed: NoSuchBucket \(HTTP 404\): The specified bucket does not exist$/,
  });
  const err = await store.get(sha(PNG)).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(err, S3MediaStoreError, 'a missing bucket is not a missing key');
  t.match(err, {
    s3Code: 'NoSuchBucket',
    objectKey: `${sha(PNG).slice(7, 9)}/${sha(PNG)}`,
    message: /S3 GetObject s3:\/\/no-such-bucket\/.* failed: NoSuchBucket/,
  });
});

t.test('an unreachable endpoint fails fast, naming endpoint, bucket and key', async (t) => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const store = storeFor(s3, { endpoint: `http://127.0.0.1:${port}` });
  const where = `at http://127\\.0\\.0\\.1:${port} failed: connect ECONNREFUSED`;
  await t.rejects(store.check(), {
    s3Code: 'ECONNREFUSED',
    httpStatus: undefined,
    message: new RegExp(`^S3 HeadBucket s3://ens-media ${where}`),
  });
  await t.rejects(store.put(PNG, 'image/png'), {
    message: new RegExp(`^S3 HeadObject s3://ens-media/[0-9a-f]{2}/sha256-[0-9a-f]{64} ${where}`),
  });
  await t.rejects(store.get(sha(PNG)), {
    message: new RegExp(`^S3 GetObject s3://ens-media/[0-9a-f]{2}/sha256-[0-9a-f]{64} ${where}`),
  });
});

t.test('an endpoint that never answers times out', async (t) => {
  const sockets = new Set<Socket>();
  const silent = createServer(() => {});
  silent.on('connection', (s) => sockets.add(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => silent.close(() => r()));
  });
  const store = storeFor(s3, {
    endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
    timeoutMs: 150,
  });
  const started = Date.now();
  await t.rejects(store.get(sha(PNG)), {
    s3Code: 'ETIMEDOUT',
    message:
      /^S3 GetObject s3:\/\/ens-media\/.* failed: .*exceeded the configured 150 ms requestTimeout/,
  });
  t.ok(Date.now() - started < 5000, 'bounded by the timeout and the SDK retries');
});

t.test(
  'S3 server errors: retried by the SDK, then reported with S3 own code and message',
  async (t) => {
    const store = storeFor(s3, { prefix: 'faults' });
    const bytes = randomBytes(100);
    let mark = s3.requests.length;
    s3.failNext(1, { status: 503, code: 'SlowDown', message: 'Please reduce your request rate.' });
    t.equal(await store.put(bytes, 'image/png'), sha(bytes), 'one 503 is absorbed by a retry');
    t.same(since(s3, mark), ['HEAD 503', 'HEAD 404', 'PUT 200']);

    mark = s3.requests.length;
    s3.failNext(3, {
      status: 500,
      code: 'InternalError',
      message: 'We encountered an internal error. Please try again.',
    });
    await t.rejects(store.get(sha(bytes)), {
      s3Code: 'InternalError',
      httpStatus: 500,
      message:
        /^S3 GetObject s3:\/\/ens-media\/faults\/[0-9a-f]{2}\/sha256-[0-9a-f]{64} at .* failed: InternalError \(HTTP 500\): We encountered an internal error\. Please try again\.$/,
    });
    t.equal(s3.requests.length - mark, 3, 'three attempts');

    s3.failNext(3, { status: 503, code: 'SlowDown', message: 'Please reduce your request rate.' });
    await t.rejects(
      store.check(),
      {
        s3Code: undefined,
        httpStatus: 503,
        message: /^S3 HeadBucket s3:\/\/ens-media at .* failed: HTTP 503$/,
      },
      'an answer to HEAD has only its status',
    );
  },
);

t.test('AccessDenied names bucket and key; on HEAD (no body) the status says it', async (t) => {
  const store = storeFor(s3);
  const denied = { status: 403, code: 'AccessDenied', message: 'Access Denied' };
  s3.failNext(1, denied);
  await t.rejects(store.get(sha(PNG)), {
    s3Code: 'AccessDenied',
    httpStatus: 403,
    message:
      /^S3 GetObject s3:\/\/ens-media\/[0-9a-f]{2}\/sha256-[0-9a-f]{64} at .* failed: AccessDenied \(HTTP 403\): Access Denied$/,
  });
  s3.failNext(1, denied);
  await t.rejects(store.check(), {
    s3Code: 'AccessDenied',
    message: /failed: AccessDenied \(HTTP 403\)$/,
  });

  const mark = s3.requests.length;
  s3.failNext(2, denied);
  await t.rejects(
    store.put(randomBytes(10), 'image/png'),
    { message: /^S3 PutObject .* failed: AccessDenied \(HTTP 403\): Access Denied$/ },
    'a 403 on HEAD (no s3:ListBucket) still tries the PUT, whose answer is reported',
  );
  t.same(since(s3, mark), ['HEAD 403', 'PUT 403']);
});

t.test('wrong credentials are refused by the server and reported clearly', async (t) => {
  const wrongSecret = storeFor(s3, {
    credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: 'not-the-secret' },
  });
  await t.rejects(wrongSecret.put(PNG, 'image/png'), {
    s3Code: 'SignatureDoesNotMatch',
    message:
      /^S3 PutObject s3:\/\/ens-media\/.* failed: SignatureDoesNotMatch \(HTTP 403\): The request signature we calculated/,
  });
  await t.rejects(wrongSecret.check(), {
    message: /^S3 HeadBucket s3:\/\/ens-media .* failed: AccessDenied \(HTTP 403\)$/,
  });

  const unknownKey = storeFor(s3, {
    credentials: { accessKeyId: 'AKIAUNKNOWN', secretAccessKey: 'x' },
  });
  await t.rejects(unknownKey.get(sha(PNG)), {
    s3Code: 'InvalidAccessKeyId',
    message:
      /failed: InvalidAccessKeyId \(HTTP 403\): The AWS Access Key Id you provided does not exist/,
  });
});

t.test('a wrong region is reported with the region S3 names', async (t) => {
  const store = storeFor(s3, { region: 'eu-west-3' });
  await t.rejects(store.get(sha(PNG)), {
    s3Code: 'AuthorizationHeaderMalformed',
    message:
      /failed: AuthorizationHeaderMalformed \(HTTP 400\): .*the region 'eu-west-3' is wrong; expecting 'us-east-1'/,
  });
  await t.rejects(store.check(), {
    message:
      /^S3 HeadBucket s3:\/\/ens-media .* failed: BadRequest \(HTTP 400\); the bucket is in region us-east-1$/,
  });
});

t.test('the server harness: a stopped server is unreachable', async (t) => {
  const own = await startS3Server(t, { bucket: 'short-lived' });
  const store = storeFor(own);
  await t.resolves(store.check());
  await own.stop();
  await t.rejects(store.check(), { s3Code: 'ECONNREFUSED', message: /s3:\/\/short-lived/ });
});
