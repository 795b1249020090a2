import t from 'tap';
import { redactUrl } from '@ens/core/internal';
import { startTestService } from '../harness/service.ts';

/**
 * At ENS_LOG_LEVEL=debug every request is a log line with its URL; a Meta webhook check's
 * hub.verify_token, the console's sign-in code and a refused ?access_token= were written in full
 * (issue 25). The lines are captured here as ENS writes them.
 */

t.test('secret query values are redacted, the rest of the URL kept', async (t) => {
  t.equal(
    redactUrl('/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=s3cret&hub.challenge=7'),
    '/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=[redacted]&hub.challenge=7',
  );
  t.equal(
    redactUrl('/ops/callback?code=abc&state=xyz'),
    '/ops/callback?code=[redacted]&state=[redacted]',
  );
  t.equal(
    redactUrl('/v2/deliveries?ACCESS_TOKEN=x&limit=5'),
    '/v2/deliveries?ACCESS_TOKEN=[redacted]&limit=5',
  );
  t.equal(redactUrl('/x?hub%2Everify_token=s&a=1#f'), '/x?hub%2Everify_token=[redacted]&a=1#f');
  t.equal(redactUrl('/v2/deliveries?reference=code'), '/v2/deliveries?reference=code');
  t.equal(redactUrl('/v2/deliveries'), '/v2/deliveries');
  t.equal(redactUrl('/x?code'), '/x?code', 'a name without a value has nothing to hide');
});

t.test('request lines at debug carry no secret from the query', async (t) => {
  const lines: string[] = [];
  const svc = await startTestService(t, {
    roles: ['api'],
    env: { ENS_LOG_LEVEL: 'debug' },
    log: { write: (line: string) => void lines.push(line) },
  });
  const secrets = ['VERIFY-5ecret-1', 'C0DE-secret-2', 'T0KEN-secret-3', 'hidden-4'];
  const urls = [
    `/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=${secrets[0]}&hub.challenge=42`,
    `/ops/callback?code=${secrets[1]}&state=s`,
    `/v2/deliveries?access_token=${secrets[2]}`,
    `/webhooks/whatsapp?hub%2Everify_token=${secrets[3]}`,
  ];
  for (const u of urls) await svc.request('GET', u);
  const requestLines = lines
    .map((l) => JSON.parse(l) as { msg?: string; url?: string })
    .filter((l) => l.msg === 'request' || l.msg === 'request failed');
  for (const u of urls) {
    const path = u.slice(0, u.indexOf('?'));
    t.ok(
      requestLines.some((l) => l.url?.startsWith(path)),
      `a request line for ${path} was written`,
    );
  }
  t.ok(
    requestLines.some((l) => l.url?.includes('hub.verify_token=[redacted]')),
    'the parameter is named, its value redacted',
  );
  const all = lines.join('');
  for (const s of secrets) t.notOk(all.includes(s), `${s} appears in no log line`);
});
