import t from 'tap';
import { createSigner } from 'fast-jwt';
import { startTestService } from '../harness/service.ts';

/**
 * An access token must carry exp, aud and iss as ENS mints them; one signed with the right key but
 * missing any of them, or naming another audience or issuer, is refused like a forgery.
 */
t.test('tokens signed with the right key but the wrong claims', async (t) => {
  const svc = await startTestService(t);
  const c = await svc.createClient();
  const now = Math.floor(Date.now() / 1000);
  const base = {
    sub: c.clientId,
    gty: 'client_credentials',
    scope: 'messages deliveries tenants',
    iss: 'ens',
    aud: 'ens-api',
    iat: now,
    exp: now + 600,
  };
  const sign = createSigner({ key: svc.rt.tokenKey, algorithm: 'HS256' });
  const without = (k: keyof typeof base) =>
    Object.fromEntries(Object.entries(base).filter(([key]) => key !== k));
  const cases: [string, Record<string, unknown>][] = [
    ['no exp', without('exp')],
    ['no aud', without('aud')],
    ['no iss', without('iss')],
    ['no sub', without('sub')],
    ['another audience', { ...base, aud: 'someone-else' }],
    ['another issuer', { ...base, iss: 'evil' }],
    ['expired', { ...base, iat: now - 7200, exp: now - 3600 }],
  ];
  for (const [name, claims] of cases) {
    const r = await svc.request('GET', '/v2/tenants', {
      headers: { authorization: `Bearer ${sign(claims)}` },
    });
    t.equal(r.status, 401, `${name}: 401`);
    t.same(
      r.body,
      { detail: 'This endpoint requires a client-credentials token.' },
      `${name}: the standard body`,
    );
  }
  const good = await svc.request('GET', '/v2/tenants', {
    headers: { authorization: `Bearer ${sign(base)}` },
  });
  t.equal(good.status, 200, 'the same claims complete are accepted');
});
