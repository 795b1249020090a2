import t from 'tap';
import { ConfigError, loadConfig, parseBackoff, parseDuration } from '@ens/core';

t.test('defaults are the documented ones', async (t) => {
  const c = loadConfig({});
  t.equal(c.port, 8080);
  t.equal(c.host, '127.0.0.1');
  t.equal(c.tokenTtlSeconds, 3600);
  t.same(c.retryBackoffMs, [1000, 10_000, 60_000, 600_000, 3_600_000]);
  t.equal(c.callbackTimeoutMs, 10_000);
  t.equal(c.allowPrivateCallbacks, false);
  t.equal(c.idempotencyTtlMs, 24 * 3_600_000);
  t.equal(c.databaseUrl, undefined);
  t.same(c.providers.sms, ['@ens/plugin-sandbox']);
  t.equal(c.failoverThreshold, 5);
  t.equal(c.failoverCooldownMs, 30_000);
  t.same(c.media, { kind: 'directory' });
  t.equal(c.publicUrl, 'http://127.0.0.1:8080');
  t.equal(c.ops, null, 'no console sign-in until ENS_OPS_ISSUER is set');
  const ops = loadConfig({
    ENS_PUBLIC_URL: 'https://ens.example.com/',
    ENS_OPS_ISSUER: 'https://id.example.com',
    ENS_OPS_CLIENT_ID: 'ens',
    ENS_OPS_CLIENT_SECRET: 's',
    ENS_OPS_SUPERUSERS: 'Ada@Example.com, 248289761001',
    ENS_OPS_SUPERUSER_GROUP: 'ens-admins',
  });
  t.equal(ops.publicUrl, 'https://ens.example.com', 'no trailing slash');
  t.match(ops.ops, {
    issuer: 'https://id.example.com',
    scopes: 'openid email profile',
    groupsClaim: 'groups',
    superuserGroup: 'ens-admins',
    superusers: ['ada@example.com', '248289761001'],
    sessionTtlMs: 8 * 3_600_000,
  });
  t.ok(Object.isFrozen(c), 'configuration is frozen');
});

function getError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return undefined;
}

t.test('a bad variable stops start-up with its name in the message', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ PORT: 'eighty' }, /^PORT/],
    [{ PORT: '70000' }, /^PORT/],
    [{ DATABASE_URL: 'mysql://x' }, /^DATABASE_URL/],
    [{ ENS_RETRY_BACKOFF: '1s,soon' }, /^ENS_RETRY_BACKOFF: "soon" is not a duration/],
    [{ ENS_CALLBACK_BACKOFF: ',' }, /^ENS_CALLBACK_BACKOFF/],
    [{ ENS_ALLOW_PRIVATE_CALLBACKS: 'yes' }, /^ENS_ALLOW_PRIVATE_CALLBACKS/],
    [{ ENS_PROVIDERS: 'fax=@x/y' }, /^ENS_PROVIDERS/],
    [{ ENS_PROVIDER_CONFIG: '{not json' }, /^ENS_PROVIDER_CONFIG/],
    [{ ENS_LOG_LEVEL: 'loud' }, /^ENS_LOG_LEVEL/],
    [{ ENS_PROVIDERS: 'sms=@x/a,sms=@x/b' }, /^ENS_PROVIDERS: sms is named twice/],
    [{ ENS_PROVIDERS: 'sms=@x/a|@x/a' }, /^ENS_PROVIDERS: sms lists a provider twice/],
    [
      { ENS_PROVIDERS: 'sms=./my plugin' },
      /^ENS_PROVIDERS: sms=\.\/my plugin: "\.\/my plugin" is not an npm package name/,
    ],
    [{ ENS_FAILOVER_THRESHOLD: '0' }, /^ENS_FAILOVER_THRESHOLD/],
    [{ ENS_FAILOVER_COOLDOWN: 'later' }, /^ENS_FAILOVER_COOLDOWN/],
    [{ ENS_MEDIA_STORE: 'ftp' }, /^ENS_MEDIA_STORE/],
    [{ ENS_MEDIA_STORE: 's3' }, /^ENS_S3_BUCKET: required when ENS_MEDIA_STORE=s3/],
    [{ ENS_S3_BUCKET: 'images' }, /^ENS_S3_BUCKET: is set, but ENS_MEDIA_STORE is not s3/],
    [{ ENS_MEDIA_STORE: 's3', ENS_S3_BUCKET: 'Bad_Bucket' }, /^ENS_S3_BUCKET/],
    [
      { ENS_OPS_ISSUER: 'https://id.example.com' },
      /^ENS_OPS_CLIENT_ID: required when ENS_OPS_ISSUER is set/,
    ],
    [{ ENS_OPS_SUPERUSERS: 'ada@example.com' }, /^ENS_OPS_SUPERUSERS: is set, but ENS_OPS_ISSUER/],
    [
      { ENS_OPS_ISSUER: 'id.example.com', ENS_OPS_CLIENT_ID: 'a', ENS_OPS_CLIENT_SECRET: 'b' },
      /^ENS_OPS_ISSUER/,
    ],
    [
      {
        ENS_OPS_ISSUER: 'https://id.example.com',
        ENS_OPS_CLIENT_ID: 'a',
        ENS_OPS_CLIENT_SECRET: 'b',
        ENS_OPS_SCOPES: 'email',
      },
      /^ENS_OPS_SCOPES/,
    ],
    [{ ENS_PUBLIC_URL: 'ens.example.com' }, /^ENS_PUBLIC_URL/],
  ];
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { code: 'ENS_ERR_CONFIG', message }, JSON.stringify(env));
    t.ok(getError(() => loadConfig(env)) instanceof ConfigError);
  }
});

t.test('providers and back-off schedules parse', async (t) => {
  const c = loadConfig({
    ENS_PROVIDERS: 'sms=@acme/plugin-sms | ens-plugin-smpp, email=@acme/plugin-mail',
    ENS_RETRY_BACKOFF: '100ms, 2s,1m',
  });
  t.same(
    c.providers.sms,
    ['@acme/plugin-sms', 'ens-plugin-smpp'],
    '| lists fail-over providers in order',
  );
  t.same(c.providers.email, ['@acme/plugin-mail']);
  t.same(c.providers.push, ['@ens/plugin-sandbox'], 'a channel not named stays on the sandbox');
  const s3 = loadConfig({
    ENS_MEDIA_STORE: 's3',
    ENS_S3_BUCKET: 'ens-images',
    ENS_S3_ENDPOINT: 'http://127.0.0.1:9000',
    ENS_S3_FORCE_PATH_STYLE: 'true',
  });
  t.same(s3.media, {
    kind: 's3',
    bucket: 'ens-images',
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9000',
    forcePathStyle: true,
    prefix: '',
  });
  t.same(c.retryBackoffMs, [100, 2000, 60_000]);
  t.equal(parseDuration('1.5s'), 1500);
  t.equal(parseDuration('2'), 2000, 'a bare number is seconds');
  t.equal(parseDuration('1d'), 86_400_000);
  t.same(parseBackoff(''), []);
  t.throws(() => parseDuration('-1s'));
});
