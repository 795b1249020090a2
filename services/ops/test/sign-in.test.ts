import t from 'tap';
import { freePort } from '@ens/local-engines';
import { startTestService } from '../../../test/harness/service.ts';
import { startTestIdp } from '../../../test/harness/oidc-provider.ts';
import { ConsoleBrowser } from './console-session.ts';

/**
 * The whole sign-in against a real OpenID Provider (oidc-provider: PKCE required,
 * client_secret_basic), driven over HTTP without a browser: redirect, the provider's login form,
 * the callback, the session.
 */
const port = await freePort();
const idp = await startTestIdp(t, { ensPublicUrl: `http://127.0.0.1:${port}` });
const svc = await startTestService(t, {
  env: {
    PORT: String(port),
    ...idp.env,
    ENS_OPS_SUPERUSER_GROUP: 'ens-superusers',
    ENS_OPS_CONTACT: 'ops@example.com',
  },
  roles: ['api'],
});

/** Follows redirects by hand (so cookies are kept) until a page that is not a redirect. */
async function follow(
  b: ConsoleBrowser,
  first: { status: number; headers: Headers; text: string },
  from: string,
) {
  let r = first;
  let url = from;
  const trail: string[] = [];
  while (r.status >= 300 && r.status < 400) {
    url = new URL(r.headers.get('location')!, url).href;
    trail.push(url);
    r = await b.get(url);
  }
  return { r, url, trail };
}

async function signIn(sub: string, startAt: string) {
  const b = new ConsoleBrowser(svc.baseUrl);
  const start = await follow(b, await b.get(startAt), svc.baseUrl + startAt);
  t.match(start.url, new RegExp(`^${idp.issuer}/interaction/`), "at the provider's login page");
  const action = new URL(
    /<form autocomplete="off" action="([^"]+)"/.exec(start.r.text)![1]!.replace(/&amp;/g, '&'),
    start.url,
  ).href;
  const done = await follow(
    b,
    await b.post(action, { prompt: 'login', login: sub, password: 'x' }),
    action,
  );
  return { b, ...done };
}

t.test('a superuser (by group) signs in and lands where they were going', async (t) => {
  const { b, r, url, trail } = await signIn('u-7f3a-ada', '/ops/clients');
  t.ok(
    trail.some((u) => u.startsWith(`${svc.baseUrl}/ops/callback?`)),
    'came back through the callback',
  );
  t.equal(url, `${svc.baseUrl}/ops/clients`);
  t.equal(r.status, 200);
  t.match(r.text, /<span id="whoami">ada@example.com<\/span>/, 'the email, not the subject');
  t.ok(b.cookies.has('ens_ops_session'));
  t.notOk(b.cookies.has('ens_ops_login'), 'the login state is cleared');
  const req = idp.authorizationRequests.at(-1)!;
  t.equal(req.searchParams.get('code_challenge_method'), 'S256');
  const { rows } = await svc.rt.db.query(
    `SELECT subject, email, groups, granted FROM staff WHERE subject = 'u-7f3a-ada'`,
  );
  t.same(
    rows,
    [
      {
        subject: 'u-7f3a-ada',
        email: 'ada@example.com',
        groups: ['ens-superusers', 'engineering'],
        granted: false,
      },
    ],
    'staff record made at first sign-in',
  );
  const audit = await svc.rt.db.query(
    `SELECT actor, detail FROM audit_log WHERE action = 'staff.sign_in' AND actor = 'ada@example.com'`,
  );
  t.match(audit.rows[0], { detail: { superuser: true, rights_from: ['group'] } });
});

t.test('a non-superuser signs in and gets the notice', async (t) => {
  const { r } = await signIn('u-91c2-bob', '/ops/');
  t.equal(r.status, 403);
  t.match(r.text, /<h1>You don't have access to the ENS console<\/h1>/);
  t.match(r.text, /<span id="whoami">bob@example.com<\/span>/);
  t.match(r.text, /<p id="contact">[^<]*ops@example.com/);
});

t.test('a replayed callback does not start a second session', async (t) => {
  const { trail } = await signIn('u-7f3a-ada', '/ops/');
  const callback = trail.find((u) => u.startsWith(`${svc.baseUrl}/ops/callback?`))!;
  const replay = await new ConsoleBrowser(svc.baseUrl).get(callback.slice(svc.baseUrl.length));
  t.equal(replay.status, 400, 'no login state in this browser');
});
