import { createPublicKey } from 'node:crypto';
import { createServer } from 'node:http';
import t from 'tap';
import { createVerifier } from 'fast-jwt';
import {
  AccessTokenSource,
  FCM_SCOPE,
  JWT_BEARER_GRANT,
  REFRESH_MARGIN_MS,
} from '../src/access-token.ts';
import { readServiceAccount } from '../src/service-account.ts';
import { deviceToken, FakeFcm } from '../src/testing/fake-fcm.ts';
import { failureOf, provider, pushTo } from './helpers.ts';

const fake = new FakeFcm();
const baseUrl = await fake.start();
t.teardown(() => fake.stop());
const sa = fake.serviceAccount({ projectId: 'ens-oauth' });

t.test('the token exchange posts a signed JWT bearer assertion Google accepts', async (t) => {
  const before = fake.received.length;
  const { p } = await provider({ serviceAccount: sa, baseUrl });
  const r = await p.send(pushTo(deviceToken()));
  t.match(r.providerMessageId, /^projects\/ens-oauth\/messages\/0:\d+%[0-9a-f]+$/);
  const [tokenReq, sendReq] = fake.received.slice(before);
  t.equal(tokenReq?.endpoint, 'token', 'the token exchange comes first');
  t.equal(tokenReq?.path, '/token', 'posted to the service account token_uri');
  t.equal(tokenReq?.method, 'POST');
  t.match(tokenReq?.headers['content-type'], /^application\/x-www-form-urlencoded/);
  t.same(
    Object.keys(tokenReq?.form ?? {}).sort(),
    ['assertion', 'grant_type'],
    'exactly grant_type and assertion',
  );
  t.equal(tokenReq?.form?.grant_type, JWT_BEARER_GRANT);
  t.equal(tokenReq?.status, 200);

  const assertion = tokenReq!.form!.assertion!;
  const verify = createVerifier({
    key: createPublicKey(sa.private_key).export({ type: 'spki', format: 'pem' }) as string,
    algorithms: ['RS256'],
    complete: true,
  });
  const { header, payload } = verify(assertion) as {
    header: Record<string, unknown>;
    payload: Record<string, number | string>;
  };
  t.same(
    header,
    { alg: 'RS256', typ: 'JWT', kid: sa.private_key_id },
    'RS256, kid = private_key_id',
  );
  t.same(Object.keys(payload).sort(), ['aud', 'exp', 'iat', 'iss', 'scope']);
  t.equal(payload.iss, sa.client_email);
  t.equal(payload.scope, FCM_SCOPE);
  t.equal(payload.aud, sa.token_uri);
  t.equal(Number(payload.exp) - Number(payload.iat), 3600, 'exp = iat + 3600');
  t.ok(Math.abs(Number(payload.iat) - Date.now() / 1000) < 60, 'iat is now');

  t.equal(sendReq?.endpoint, 'send');
  t.match(
    sendReq?.headers.authorization,
    /^Bearer ya29\.c\.fake-/,
    'the send carries the issued access token',
  );
});

t.test('one exchange serves many sends, sequential and concurrent', async (t) => {
  const { p } = await provider({ serviceAccount: sa, baseUrl });
  const before = fake.exchanges;
  const beforeReq = fake.tokenRequests().length;
  const concurrent = await Promise.all(
    Array.from({ length: 10 }, () => p.send(pushTo(deviceToken()))),
  );
  for (let i = 0; i < 5; i++) await p.send(pushTo(deviceToken()));
  t.equal(concurrent.length, 10);
  t.equal(fake.exchanges - before, 1, 'one exchange for 15 sends');
  t.equal(
    fake.tokenRequests().length - beforeReq,
    1,
    'one request to the token endpoint: concurrent sends share the exchange in flight',
  );
  const bearers = new Set(
    fake
      .sendRequests()
      .slice(-15)
      .map((r) => r.headers.authorization),
  );
  t.equal(bearers.size, 1, 'every send used the same access token');
});

t.test('a token is not reused when it expires within the refresh margin', async (t) => {
  fake.tokenLifetimeSec = REFRESH_MARGIN_MS / 1000; // lapses as it is issued, for our margin
  t.teardown(() => {
    fake.tokenLifetimeSec = 3599;
  });
  const { p } = await provider({ serviceAccount: sa, baseUrl });
  const before = fake.exchanges;
  await p.send(pushTo(deviceToken()));
  await p.send(pushTo(deviceToken()));
  t.equal(fake.exchanges - before, 2, 'each send exchanged anew');
});

t.test('the cached token is kept until shortly before expires_in, then replaced', async (t) => {
  fake.tokenLifetimeSec = 120; // short, so that the clock moves within the fake's tolerance for iat
  t.teardown(() => {
    fake.tokenLifetimeSec = 3599;
  });
  let now = Date.now();
  const source = new AccessTokenSource(readServiceAccount(sa, '/serviceAccount'), {
    timeoutMs: 5_000,
    now: () => now,
  });
  const before = fake.exchanges;
  const first = await source.get();
  now += 120_000 - REFRESH_MARGIN_MS - 1;
  t.equal(await source.get(), first, 'still cached just before the margin');
  t.equal(fake.exchanges - before, 1);
  now += 2;
  const second = await source.get();
  t.not(second, first, 'a new token once inside the margin');
  t.equal(fake.exchanges - before, 2);
  source.invalidate(first);
  t.equal(await source.get(), second, 'invalidating a superseded token keeps the current one');
  t.equal(fake.exchanges - before, 2);
});

t.test('a 401 from FCM drops the token and retries the send once with a new one', async (t) => {
  const { p, ctx } = await provider({ serviceAccount: sa, baseUrl });
  await p.send(pushTo(deviceToken()));
  fake.revokeAccessTokens();
  const exchanges = fake.exchanges;
  const sendsBefore = fake.sendRequests().length;
  const r = await p.send(pushTo(deviceToken()));
  t.match(r.providerMessageId, /^projects\/ens-oauth\/messages\//, 'the retried send succeeded');
  const sends = fake.sendRequests().slice(sendsBefore);
  t.same(
    sends.map((s) => s.status),
    [401, 200],
    'refused once, then accepted',
  );
  t.not(
    sends[0]?.headers.authorization,
    sends[1]?.headers.authorization,
    'the retry used a new token',
  );
  t.equal(fake.exchanges - exchanges, 1, 'one new exchange');
  t.match(ctx.logs.find((l) => l.level === 'warn')?.msg, /refused the access token/);
  t.notMatch(JSON.stringify(ctx.logs), /ya29|PRIVATE KEY/, 'no secret in the logs');
});

t.test('a second 401 is transient and is not retried again', async (t) => {
  const { p } = await provider({ serviceAccount: sa, baseUrl });
  await p.send(pushTo(deviceToken()));
  fake.failNext('unauthenticated', 2);
  const sendsBefore = fake.sendRequests().length;
  const f = await failureOf(p, pushTo(deviceToken()));
  t.equal('kind' in f && f.kind, 'transient');
  t.match(
    'message' in f && f.message,
    /^fcm UNAUTHENTICATED: Request had invalid authentication credentials/,
  );
  t.equal(fake.sendRequests().length - sendsBefore, 2, 'two attempts in all');
  await p.send(pushTo(deviceToken()));
  t.pass('the next send exchanges again and succeeds');
});

t.test("token endpoint refusals are transient and carry Google's description", async (t) => {
  const { p } = await provider({ serviceAccount: sa, baseUrl });
  fake.failNextTokenExchange(
    'invalid_grant',
    'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.',
  );
  const f = await failureOf(p, pushTo(deviceToken()));
  t.equal('kind' in f && f.kind, 'transient');
  t.equal(
    'message' in f && f.message,
    `fcm: OAuth token exchange for ${sa.client_email} refused (HTTP 400 invalid_grant: Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.)`,
  );
  const r = await p.send(pushTo(deviceToken()));
  t.ok(r.providerMessageId, 'a failed exchange is not cached: the next send exchanges again');
});

t.test(
  'a key Google does not know: "Invalid JWT Signature."; an unknown account: "account not found"',
  async (t) => {
    const { p } = await provider({ serviceAccount: fake.untrustedServiceAccount(sa), baseUrl });
    const f = await failureOf(p, pushTo(deviceToken()));
    t.equal('kind' in f && f.kind, 'transient');
    t.match(
      'message' in f && f.message,
      /refused \(HTTP 400 invalid_grant: Invalid JWT Signature\.\)$/,
    );
    await t.rejects(p.checkCredentials!(), {
      message: /app default: .*invalid_grant: Invalid JWT Signature\./,
      ensErrorKind: 'transient',
    });

    const { p: stranger } = await provider({
      serviceAccount: fake.untrustedServiceAccount(),
      baseUrl,
    });
    await t.rejects(stranger.checkCredentials!(), {
      message: /invalid_grant: Invalid grant: account not found/,
    });
  },
);

t.test('checkCredentials() performs a token exchange even when a token is cached', async (t) => {
  const { p } = await provider({ serviceAccount: sa, baseUrl });
  await p.send(pushTo(deviceToken()));
  const before = fake.exchanges;
  await p.checkCredentials!();
  t.equal(fake.exchanges - before, 1);
  const n = fake.sendRequests().length;
  await p.send(pushTo(deviceToken()));
  t.equal(fake.exchanges - before, 1, 'the checked token is then used by sends');
  t.equal(fake.sendRequests().length - n, 1);
});

t.test('an unreachable or silent token endpoint is transient', async (t) => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const freePort = (closed.address() as { port: number }).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const { p } = await provider({
    serviceAccount: { ...sa, token_uri: `http://127.0.0.1:${freePort}/token` },
    baseUrl,
  });
  const f = await failureOf(p, pushTo(deviceToken()));
  t.equal('kind' in f && f.kind, 'transient');
  t.equal(
    'message' in f && f.message,
    `fcm: OAuth token exchange at http://127.0.0.1:${freePort}/token failed: fetch failed (ECONNREFUSED)`,
  );

  const silent = createServer(() => {});
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        silent.closeAllConnections();
        silent.close(() => r());
      }),
  );
  const port = (silent.address() as { port: number }).port;
  const { p: slow } = await provider({
    serviceAccount: { ...sa, token_uri: `http://127.0.0.1:${port}/token` },
    baseUrl,
    timeoutMs: 200,
  });
  const g = await failureOf(slow, pushTo(deviceToken()));
  t.equal('kind' in g && g.kind, 'transient');
  t.match('message' in g && g.message, /no answer within 200 ms/);
});

t.test(
  'the service account may be given as JSON text, with escaped line breaks in the key',
  async (t) => {
    const json = JSON.stringify({ ...sa, private_key: sa.private_key.replace(/\n/g, '\\n') });
    const { p } = await provider({ serviceAccount: json, baseUrl });
    const r = await p.send(pushTo(deviceToken()));
    t.match(r.providerMessageId, /^projects\/ens-oauth\//);
  },
);
