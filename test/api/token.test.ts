import t from 'tap';
import { request } from 'node:http';
import { startTestService, type TestService } from '../harness/service.ts';

/**
 * POST /v1/oauth2/token/ — RFC 6749 client credentials. The service runs with a token rate limit
 * of 3 per minute per client id and per address; so that the cases do not use up one another's
 * allowance, each case sends from its own loopback address (127.0.0.N: Linux routes all of
 * 127/8 to lo, so the server sees a distinct remote address) and uses its own client.
 */
const TOKEN_RATE_LIMIT = 3;
const TTL = 1234;

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

let nextAddress = 10;
/** A loopback address no other case has used. */
const freshAddress = () => `127.0.0.${nextAddress++}`;

/** Posts to the token endpoint from `from` (a local address), with a raw body and headers. */
function tokenRequest(
  svc: TestService,
  o: { from: string; body: string; headers?: Record<string, string> },
): Promise<Reply> {
  const url = new URL('/v1/oauth2/token/', svc.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        localAddress: o.from,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...o.headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = text;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

t.test('token endpoint', async (t) => {
  const svc = await startTestService(t, {
    env: { ENS_TOKEN_RATE_LIMIT: String(TOKEN_RATE_LIMIT), ENS_TOKEN_TTL: String(TTL) },
  });

  /** A token works on /v2/ when it lists the client's tenants. */
  const works = async (token: string) =>
    (await svc.request('GET', '/v2/tenants', { headers: { authorization: `Bearer ${token}` } }))
      .status === 200;

  t.test('client authentication with form fields mints a bearer token', async (t) => {
    const c = await svc.createClient();
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({
        grant_type: 'client_credentials',
        client_id: c.clientId,
        client_secret: c.clientSecret,
      }),
    });
    t.equal(r.status, 200);
    t.same(Object.keys(r.body).sort(), ['access_token', 'expires_in', 'scope', 'token_type']);
    t.equal(r.body.token_type, 'Bearer');
    t.equal(r.body.expires_in, TTL, 'expires_in is ENS_TOKEN_TTL');
    t.type(r.body.scope, 'string');
    t.match(r.headers['cache-control'], /no-store/);
    t.ok(await works(r.body.access_token), 'the token is accepted on /v2/');
  });

  t.test('client authentication with HTTP Basic mints a bearer token', async (t) => {
    const c = await svc.createClient();
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({ grant_type: 'client_credentials' }),
      headers: { authorization: basic(c.clientId, c.clientSecret) },
    });
    t.equal(r.status, 200);
    t.equal(r.body.token_type, 'Bearer');
    t.equal(r.body.expires_in, TTL);
    t.match(r.headers['cache-control'], /no-store/);
    t.ok(await works(r.body.access_token));
  });

  t.test('HTTP Basic with a wrong secret is invalid_client', async (t) => {
    const c = await svc.createClient();
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({ grant_type: 'client_credentials' }),
      headers: { authorization: basic(c.clientId, 'not-the-secret') },
    });
    t.equal(r.status, 401);
    t.equal(r.body.error, 'invalid_client');
    t.type(r.body.detail, 'string');
  });

  t.test('a wrong secret is 401 invalid_client', async (t) => {
    const c = await svc.createClient();
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({
        grant_type: 'client_credentials',
        client_id: c.clientId,
        client_secret: `${c.clientSecret}x`,
      }),
    });
    t.equal(r.status, 401);
    t.equal(r.body.error, 'invalid_client');
    t.type(r.body.detail, 'string');
    t.ok(r.body.detail.length > 0);
    t.notOk(r.body.access_token);
  });

  t.test(
    'an unknown client is 401 invalid_client, the same answer as a wrong secret',
    async (t) => {
      const r = await tokenRequest(svc, {
        from: freshAddress(),
        body: form({
          grant_type: 'client_credentials',
          client_id: 'ens_nosuchclient',
          client_secret: 'whatever',
        }),
      });
      t.equal(r.status, 401);
      t.equal(r.body.error, 'invalid_client');
      t.type(r.body.detail, 'string');
    },
  );

  t.test('missing credentials are 401 invalid_client', async (t) => {
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({ grant_type: 'client_credentials' }),
    });
    t.equal(r.status, 401);
    t.equal(r.body.error, 'invalid_client');
  });

  t.test('a missing grant_type is 400 invalid_request', async (t) => {
    const c = await svc.createClient();
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({ client_id: c.clientId, client_secret: c.clientSecret }),
    });
    t.equal(r.status, 400);
    t.equal(r.body.error, 'invalid_request');
    t.type(r.body.detail, 'string');
  });

  t.test('another grant type is 400 unsupported_grant_type', async (t) => {
    const c = await svc.createClient();
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({
        grant_type: 'password',
        username: 'u',
        password: 'p',
        client_id: c.clientId,
        client_secret: c.clientSecret,
      }),
    });
    t.equal(r.status, 400);
    t.equal(r.body.error, 'unsupported_grant_type');
    t.match(r.body.detail, /password/);
  });

  t.test('a body that is not form-encoded is 400 invalid_request', async (t) => {
    const c = await svc.createClient();
    const fields = {
      grant_type: 'client_credentials',
      client_id: c.clientId,
      client_secret: c.clientSecret,
    };
    const from = freshAddress();
    const json = await tokenRequest(svc, {
      from,
      body: JSON.stringify(fields),
      headers: { 'content-type': 'application/json' },
    });
    t.equal(json.status, 400, 'application/json');
    t.equal(json.body.error, 'invalid_request');
    const text = await tokenRequest(svc, {
      from,
      body: form(fields),
      headers: { 'content-type': 'text/plain' },
    });
    t.equal(text.status, 400, 'text/plain');
    t.equal(text.body.error, 'invalid_request');
    const xml = await tokenRequest(svc, {
      from: freshAddress(),
      body: '<token/>',
      headers: { 'content-type': 'application/xml' },
    });
    t.equal(xml.status, 400, 'a type the server has no parser for');
    t.equal(xml.body.error, 'invalid_request');
  });

  t.test('a disabled client cannot mint a token', async (t) => {
    const c = await svc.createClient();
    t.ok(await svc.rt.clients.disable(c.clientId));
    const r = await tokenRequest(svc, {
      from: freshAddress(),
      body: form({
        grant_type: 'client_credentials',
        client_id: c.clientId,
        client_secret: c.clientSecret,
      }),
    });
    t.equal(r.status, 401);
    t.equal(r.body.error, 'invalid_client');
    t.notOk(r.body.access_token);
  });

  t.test(
    'a client id is not limited across addresses: only failures count, per (client id, address)',
    async (t) => {
      const c = await svc.createClient();
      const fields = form({
        grant_type: 'client_credentials',
        client_id: c.clientId,
        client_secret: c.clientSecret,
      });
      for (let i = 0; i < TOKEN_RATE_LIMIT + 2; i++) {
        t.equal(
          (await tokenRequest(svc, { from: freshAddress(), body: fields })).status,
          200,
          `request ${i + 1}, from a new address, gets a token`,
        );
      }
      const guesser = freshAddress();
      const wrong = form({
        grant_type: 'client_credentials',
        client_id: c.clientId,
        client_secret: 'guess',
      });
      let over = await tokenRequest(svc, { from: guesser, body: wrong });
      for (let i = 0; i < 20 && over.status === 401; i++)
        over = await tokenRequest(svc, { from: guesser, body: wrong });
      t.equal(over.status, 429, 'repeated wrong secrets from one address are limited');
      t.equal(over.body.code, 'ENS_ERR_RATE_LIMITED');
      t.type(over.body.detail, 'string');
      t.ok(Number(over.headers['retry-after']) >= 1, 'Retry-After is a positive number of seconds');
      t.ok(Number(over.headers['retry-after']) <= 60);
      t.equal(
        (await tokenRequest(svc, { from: freshAddress(), body: fields })).status,
        200,
        'the client itself, from its own address, is not affected',
      );
    },
  );

  t.test('the endpoint is rate-limited per address, across client ids', async (t) => {
    const from = freshAddress();
    for (let i = 0; i < TOKEN_RATE_LIMIT; i++) {
      const c = await svc.createClient();
      const r = await tokenRequest(svc, {
        from,
        body: form({
          grant_type: 'client_credentials',
          client_id: c.clientId,
          client_secret: c.clientSecret,
        }),
      });
      t.equal(r.status, 200, `request ${i + 1} is within the limit`);
    }
    const c = await svc.createClient();
    const fields = form({
      grant_type: 'client_credentials',
      client_id: c.clientId,
      client_secret: c.clientSecret,
    });
    const over = await tokenRequest(svc, { from, body: fields });
    t.equal(
      over.status,
      429,
      'a fourth client from the same address is over the per-address limit',
    );
    t.equal(over.body.code, 'ENS_ERR_RATE_LIMITED');
    t.type(over.body.detail, 'string');
    t.ok(Number(over.headers['retry-after']) >= 1);
    const failed = await tokenRequest(svc, {
      from,
      body: form({
        grant_type: 'client_credentials',
        client_id: 'ens_guess',
        client_secret: 'guess',
      }),
    });
    t.equal(
      failed.status,
      429,
      'guessing from a limited address is refused before credentials are checked',
    );
    t.equal(
      (await tokenRequest(svc, { from: freshAddress(), body: fields })).status,
      200,
      'the same client from another address is fine',
    );
  });
});
