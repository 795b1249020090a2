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
  t.equal(c.providers.sms, '@ens/plugin-sandbox');
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
  ];
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { code: 'ENS_ERR_CONFIG', message }, JSON.stringify(env));
    t.ok(getError(() => loadConfig(env)) instanceof ConfigError);
  }
});

t.test('providers and back-off schedules parse', async (t) => {
  const c = loadConfig({ ENS_PROVIDERS: 'sms=@acme/plugin-sms, email=@acme/plugin-mail', ENS_RETRY_BACKOFF: '100ms, 2s,1m' });
  t.equal(c.providers.sms, '@acme/plugin-sms');
  t.equal(c.providers.email, '@acme/plugin-mail');
  t.equal(c.providers.push, '@ens/plugin-sandbox');
  t.same(c.retryBackoffMs, [100, 2000, 60_000]);
  t.equal(parseDuration('1.5s'), 1500);
  t.equal(parseDuration('2'), 2000, 'a bare number is seconds');
  t.equal(parseDuration('1d'), 86_400_000);
  t.same(parseBackoff(''), []);
  t.throws(() => parseDuration('-1s'));
});
