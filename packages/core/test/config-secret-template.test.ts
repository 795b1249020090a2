import t from 'tap';
import { ConfigError, loadConfig } from '@ens/core';

/**
 * The Kubernetes Secret template (deploy/kubernetes/secret.template.yaml) applied as it is: found
 * as a NATS_URL placeholder making every process retry `getaddrinfo ENOTFOUND HOST` for ever, the
 * AWS placeholders not checked, and a malformed ENS_MASTER_KEY printed in full in the error.
 */

function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e.message;
    throw e;
  }
  return '(accepted)';
}

t.test(
  "a value left as the template's placeholder stops the start, naming the variable",
  async (t) => {
    for (const [name, value] of [
      ['NATS_URL', 'CHANGE-ME nats://HOST:4222'],
      ['NATS_URL', 'nats://HOST:4222'],
      ['DATABASE_URL', 'postgres://USER:PASSWORD@HOST:5432/ens'],
      ['ENS_MASTER_KEY', 'CHANGE-ME output of: openssl rand -base64 32'],
      ['AWS_ACCESS_KEY_ID', 'CHANGE-ME'],
      ['AWS_SECRET_ACCESS_KEY', 'CHANGE-ME'],
    ] as const) {
      const message = refusal({ [name]: value });
      t.match(message, new RegExp(`^${name}: still the placeholder of the Secret template`), name);
      t.notMatch(message, /PASSWORD|openssl/, `${name}: the value is not repeated`);
    }
    t.equal(refusal({ NATS_URL: 'nats://nats-0.nats:4222,nats://nats-1.nats:4222' }), '(accepted)');
    t.equal(refusal({ AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE' }), '(accepted)');
  },
);

t.test('a malformed secret is described by its shape, never printed', async (t) => {
  const key = `not-base64!!${'x'.repeat(40)}`;
  const message = refusal({ ENS_MASTER_KEY: key });
  t.match(message, /^ENS_MASTER_KEY: invalid value \(52 characters, not shown\)/);
  t.notMatch(message, /not-base64/);
  const url = refusal({ DATABASE_URL: 'mysql://ens:hunter2@db:3306/ens' });
  t.match(url, /^DATABASE_URL: invalid value "mysql:\/\/ens:\*\*\*@db:3306\/ens"/);
  t.notMatch(url, /hunter2/, "a URL's password is masked");
});
