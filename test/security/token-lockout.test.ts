import t from 'tap';
import { request } from 'node:http';
import { startTestService } from '../harness/service.ts';

/**
 * Client ids are not secret (they are the tokens' `sub`), so failed attempts must not spend a
 * legitimate caller's budget. Before: 60 wrong secrets for client B from one address made B's
 * correct credentials from another address get 429 for a minute.
 */
t.test('wrong secrets from one address do not lock out the right ones from another', async (t) => {
  const svc = await startTestService(t, { env: { ENS_TOKEN_RATE_LIMIT: '12' } });
  const b = await svc.createClient({ name: 'b' });
  // Linux routes all of 127.0.0.0/8 to loopback: binding the client's side of the connection to
  // another of those addresses makes it a second caller, as the server sees it.
  const attacker = '127.0.0.1';
  const legit = '127.0.0.2';
  const token = (localAddress: string, secret: string) =>
    new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
      const body = new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: b.clientId,
        client_secret: secret,
      }).toString();
      const req = request(
        `${svc.baseUrl}/v1/oauth2/token/`,
        {
          method: 'POST',
          localAddress,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              body: JSON.parse(text) as Record<string, unknown>,
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  const statuses: number[] = [];
  for (let i = 0; i < 60; i++) statuses.push((await token(attacker, 'wrong-secret')).status);
  t.ok(statuses.includes(429), 'the guessing address is slowed down');
  t.same([...new Set(statuses)].sort(), [401, 429], 'it only ever gets 401 or 429');

  const right = await token(legit, b.clientSecret);
  t.equal(right.status, 200, 'the right secret from another address gets a token');
  t.type(right.body.access_token, 'string');

  const fromAttacker = await token(attacker, b.clientSecret);
  t.equal(
    fromAttacker.status,
    429,
    'the guessing address stays limited, even with the right secret',
  );

  // The per-address limit on all requests still holds for any address.
  const other = '127.0.0.3';
  const burst: number[] = [];
  for (let i = 0; i < 14; i++) burst.push((await token(other, b.clientSecret)).status);
  t.ok(
    burst.slice(0, 12).every((s) => s === 200),
    'up to ENS_TOKEN_RATE_LIMIT requests a minute are served',
  );
  t.equal(burst.at(-1), 429, 'beyond it, 429');
});
