import t from 'tap';
import Fastify from 'fastify';
import type { Runtime } from '@ens/core';
import { handoffIdsEnd } from '@ens/core/internal';
import { html, raw } from '../src/views/html.ts';
import { superuserSources, isSuperuser, groupsFromClaim } from '../src/staff/superuser.ts';
import { checkIssuer } from '../src/oidc.ts';
import { safeReturnTo } from '../src/routes/auth.ts';
import { parseTime } from '../src/routes/deliveries.ts';
import { parseLimits } from '../src/routes/clients.ts';
import { parseRule } from '../src/routes/alerts.ts';
import { isFiring } from '../src/alerts/evaluator.ts';
import { opsConsole } from '../src/console.ts';
import { duration, time, totalLine } from '../src/views/components.ts';
import { contentFields, HIDDEN_FLOW, HIDDEN_SECRET } from '../src/views/message-content.ts';
import { backlogPanel, backlogWarning } from '../src/views/backlog-panel.ts';
import { BACKLOG_WARN_SECONDS, type Backlog } from '../src/queries/backlog.ts';

t.test('html escapes every interpolation unless raw', async (t) => {
  const evil = `<script>alert("x")</script>&'`;
  t.equal(
    html`<p>${evil}</p>`.value,
    '<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;</p>',
  );
  t.equal(
    html`<p title="${evil}">${raw('<b>ok</b>')}</p>`.value,
    '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"><b>ok</b></p>',
  );
  t.equal(
    html`<ul>${['<a>', html`<li>x</li>`]}</ul>`.value,
    '<ul>&lt;a&gt;<li>x</li></ul>',
    'arrays: each item escaped or kept',
  );
  t.equal(html`${null}${undefined}${false}${0}`.value, '0');
});

t.test('superuser decision', async (t) => {
  const ops = { superuserGroup: 'ens-admins', superusers: ['boss@example.com', 'sub-42'] };
  const base = {
    subject: 'sub-1',
    email: 'ann@example.com',
    groups: [] as string[],
    granted: false,
  };
  t.same(superuserSources(base, ops), [], 'nobody by default');
  t.notOk(isSuperuser(base, ops));
  t.same(
    superuserSources({ ...base, groups: ['staff', 'ens-admins'] }, ops),
    ['group'],
    'the configured group at the last sign-in',
  );
  t.same(
    superuserSources({ ...base, groups: ['ENS-ADMINS'] }, ops),
    [],
    'group names match exactly',
  );
  t.same(
    superuserSources({ ...base, email: 'Boss@Example.com' }, ops),
    ['allow-list'],
    'email in ENS_OPS_SUPERUSERS, any case',
  );
  t.same(
    superuserSources({ ...base, subject: 'SUB-42', email: null }, ops),
    ['allow-list'],
    'subject in ENS_OPS_SUPERUSERS',
  );
  t.same(superuserSources({ ...base, granted: true }, ops), ['grant'], 'ens staff grant');
  t.same(
    superuserSources({ ...base, granted: true, groups: ['ens-admins'] }, ops),
    ['group', 'grant'],
    'every source is named',
  );
  t.same(
    superuserSources({ ...base, groups: ['ens-admins'] }, { superuserGroup: null, superusers: [] }),
    [],
    'no group configured: groups grant nothing',
  );
  t.same(groupsFromClaim(['a', 1, 'b']), ['a', 'b']);
  t.same(groupsFromClaim('ops team'), ['ops team']);
  t.same(groupsFromClaim(undefined), []);
});

t.test('issuer: https, or http on loopback only', async (t) => {
  t.equal(checkIssuer('https://id.example.com/realms/x').hostname, 'id.example.com');
  t.equal(checkIssuer('http://127.0.0.1:9000').port, '9000');
  t.equal(checkIssuer('http://localhost:9000').hostname, 'localhost');
  t.throws(() => checkIssuer('http://id.example.com'), {
    code: 'ENS_ERR_CONFIG',
    message: /ENS_OPS_ISSUER: http:\/\/id\.example\.com must use https/,
  });
  t.throws(() => checkIssuer('http://10.0.0.5'), { code: 'ENS_ERR_CONFIG' });
});

t.test('return_to stays inside the console', async (t) => {
  t.equal(safeReturnTo('/ops/clients?after=x'), '/ops/clients?after=x');
  t.equal(safeReturnTo('/ops'), '/ops');
  for (const bad of [
    'https://evil.example/ops/',
    '//evil.example/ops/',
    '/opsx',
    '/ops\\..\\x',
    '/ops/../v2/tenants',
    '/ops/ x',
    undefined,
    ['/ops/'],
  ]) {
    t.equal(safeReturnTo(bad), '/ops/', `refuses ${JSON.stringify(bad)}`);
  }
});

t.test('form parsing', async (t) => {
  t.equal(parseTime('2025-01-31T14:00'), '2025-01-31T14:00:00.000Z', 'datetime-local is UTC');
  t.equal(parseTime('2025-01-31T14:00:00+02:00'), '2025-01-31T12:00:00.000Z');
  t.equal(parseTime('yesterday'), null);

  const ok = parseLimits({
    rate: '50',
    quota_sms: '1000',
    quota_email: '',
    quota_push: '0',
    quota_whatsapp: ' ',
  });
  t.same(ok.errors, {});
  t.same(ok.limits, {
    rateLimit: 50,
    dailyQuota: { sms: 1000, email: null, push: 0, whatsapp: null },
  });
  const bad = parseLimits({ rate: '0', quota_sms: '-1', quota_email: 'lots' });
  t.same(
    Object.keys(bad.errors).sort(),
    ['quota_email', 'quota_sms', 'rate'],
    'one message per bad field',
  );

  const rule = parseRule(
    {
      name: 'Orders',
      scope: 'event_type',
      value: 'order.shipped',
      window_minutes: '15',
      min_volume: '20',
      threshold_percent: '12.5',
      destination: 'oncall@example.com',
    },
    100,
  );
  t.same(rule.errors, {});
  t.match(rule.rule, { destination_kind: 'email', threshold_percent: 12.5, window_minutes: 15 });
  const hook = parseRule(
    {
      name: 'x',
      scope: 'tenant',
      value: 'acme',
      window_minutes: '5',
      min_volume: '1',
      threshold_percent: '100',
      destination: 'https://hooks.example.com/ens',
    },
    100,
  );
  t.equal(hook.rule?.destination_kind, 'webhook');
  const internal = parseRule(
    {
      name: 'x',
      scope: 'tenant',
      value: 'acme',
      window_minutes: '5',
      min_volume: '1',
      threshold_percent: '100',
      destination: 'http://169.254.169.254/latest',
    },
    100,
  );
  t.match(
    internal.errors.destination,
    /cannot be used/,
    'a webhook on a private or metadata address is refused when the rule is saved',
  );
  t.equal(internal.rule, null);
  const wrong = parseRule(
    {
      name: '',
      scope: 'planet',
      value: '',
      window_minutes: '0',
      min_volume: 'x',
      threshold_percent: '101',
      destination: 'not an address',
    },
    100,
  );
  t.same(Object.keys(wrong.errors).sort(), [
    'destination',
    'min_volume',
    'name',
    'scope',
    'threshold_percent',
    'value',
    'window_minutes',
  ]);
  t.equal(wrong.rule, null);
});

t.test('alert condition', async (t) => {
  t.ok(
    isFiring({ total: 20, failed: 2, min_volume: 20, threshold: 10 }),
    'at the threshold with the minimum volume',
  );
  t.notOk(
    isFiring({ total: 19, failed: 19, min_volume: 20, threshold: 10 }),
    'below the minimum volume',
  );
  t.notOk(isFiring({ total: 100, failed: 9, min_volume: 1, threshold: 10 }), 'below the threshold');
  t.notOk(isFiring({ total: 0, failed: 0, min_volume: 0, threshold: 1 }), 'nothing ended');
});

t.test('durations read as a person says them', async (t) => {
  t.equal(duration(0), '0 s');
  t.equal(duration(0.7), '0 s', 'rounded down');
  t.equal(duration(3), '3 s');
  t.equal(duration(59.9), '59 s');
  t.equal(duration(60), '1 min');
  t.equal(duration(252), '4 min 12 s');
  t.equal(duration(3_601), '1 h', 'two adjacent units at most');
  t.equal(duration(2 * 3_600 + 5 * 60 + 9), '2 h 5 min');
  t.equal(duration(3 * 86_400 + 3_600), '3 d 1 h');
  t.equal(duration(-5), '0 s', 'clock skew never shows a negative age');
});

t.test('the backlog warning shows only past the threshold', async (t) => {
  const channel = (name: 'sms' | 'email', delivery: number, callback: number) => ({
    channel: name,
    delivery_seconds: delivery,
    callback_seconds: callback,
    aging: Math.max(delivery, callback) > BACKLOG_WARN_SECONDS,
  });
  const calm: Backlog = {
    channels: [channel('sms', BACKLOG_WARN_SECONDS, 0), channel('email', 0, 0)],
    warn_seconds: BACKLOG_WARN_SECONDS,
    aging: [],
  };
  t.equal(backlogWarning(calm).value, '', 'at the threshold: no warning');
  t.notMatch(backlogPanel(calm).value, /class="aging"/);
  const stuck: Backlog = {
    channels: [channel('sms', 0, 0), channel('email', 10, 400)],
    warn_seconds: BACKLOG_WARN_SECONDS,
    aging: ['email'],
  };
  t.match(backlogWarning(stuck).value, /id="backlog-warning"[\s\S]*On email, /);
  const panel = backlogPanel(stuck).value;
  t.match(
    panel,
    /<tr data-channel="email" class="aging"><th scope="row">email<\/th><td class="num" data-kind="delivery" data-seconds="10">10 s<\/td><td class="num" data-kind="callback" data-seconds="400"><strong class="error-text">6 min 40 s<\/strong><\/td>/,
  );
  t.match(panel, /<tr data-channel="sms"><th scope="row">sms<\/th>/);
});

t.test(
  'without ENS_OPS_ISSUER every /ops/ URL says so (404, not logged as an error), and the ' +
    'stylesheet and script are served',
  async (t) => {
    const lines: { level: number; msg: string }[] = [];
    const app = Fastify({
      logger: { level: 'debug', stream: { write: (l: string) => void lines.push(JSON.parse(l)) } },
    });
    const rt = { config: { ops: null }, logger: app.log } as unknown as Runtime;
    await app.register(opsConsole(rt), { prefix: '/ops' });
    t.teardown(() => app.close());
    for (const [method, url] of [
      ['GET', '/ops/'],
      ['GET', '/ops'],
      ['GET', '/ops/clients'],
      ['POST', '/ops/clients'],
      ['GET', '/ops/api/summary'],
    ] as const) {
      const res = await app.inject({ method, url });
      t.equal(
        res.statusCode,
        404,
        `${method} ${url}: 404, not a 5xx the API's request log reports as an error`,
      );
      t.match(res.body, /The console is not configured/);
      t.match(res.body, /ENS_OPS_ISSUER[\s\S]*ENS_OPS_CLIENT_ID[\s\S]*ENS_OPS_CLIENT_SECRET/);
      t.match(
        res.body,
        /<link rel="stylesheet" href="\/ops\/assets\/console.css">/,
        'the page links the stylesheet',
      );
    }
    const css = await app.inject({ method: 'GET', url: '/ops/assets/console.css' });
    t.equal(css.statusCode, 200, 'the stylesheet is served');
    t.match(css.headers['content-type'], /text\/css/);
    t.match(css.body, /\.table-scroll/);
    const js = await app.inject({ method: 'GET', url: '/ops/assets/console.js' });
    t.equal(js.statusCode, 200, 'the script is served');
    t.match(js.headers['content-type'], /javascript/);
    t.equal(
      (await app.inject({ method: 'GET', url: '/ops/assets/constructor' })).statusCode,
      404,
      'only the two assets',
    );
    t.same(
      lines.filter((l) => l.level >= 40).map((l) => l.msg),
      [],
      'nothing logged at warn or error',
    );
    t.ok(
      lines.some((l) => l.level === 30 && /not configured/.test(l.msg)),
      'one info line says the console is not configured',
    );
  },
);

t.test("times: to the second in lists, to the millisecond on a delivery's page", async (t) => {
  const iso = '2026-11-25T11:25:56.123456+00:00';
  t.equal(time(iso).value, `<time datetime="${iso}">2026-11-25 11:25:56 UTC</time>`);
  t.equal(
    time(iso, { ms: true }).value,
    `<time datetime="${iso}">2026-11-25 11:25:56.123 UTC</time>`,
  );
  t.equal(
    time('2026-11-25T11:25:56Z', { ms: true }).value,
    '<time datetime="2026-11-25T11:25:56Z">2026-11-25 11:25:56.000 UTC</time>',
  );
});

t.test('message content: images and likely secrets are left out, the rest shown', async (t) => {
  const shown = contentFields('order.shipped', {
    kind: 'rendered',
    subject: 'Your order',
    body: 'It shipped',
    data: { order: '1001', auth_token: 'abc', api_key: 'k' },
    inline_images: [{ cid: 'logo', media_type: 'image/png', size: 1234, storage_key: 'sha256-00' }],
  });
  t.same(shown, [
    { name: 'kind', value: 'rendered' },
    { name: 'subject', value: 'Your order' },
    { name: 'body', value: 'It shipped' },
    { name: 'data.order', value: '1001' },
    { name: 'data.auth_token', value: HIDDEN_SECRET, hidden: true },
    { name: 'data.api_key', value: HIDDEN_SECRET, hidden: true },
    { name: 'inline image logo', value: 'image/png, 1234 bytes (not shown)', hidden: true },
  ]);
  t.notOk(JSON.stringify(shown).includes('sha256-00'), 'not even the storage key');
  const otp = contentFields('auth.otp', {
    kind: 'template',
    template_name: 'otp',
    language: 'en',
    body_params: ['493021'],
    url_button_suffix: 'x9',
  });
  t.same(
    otp.map((f) => [f.name, f.value]),
    [
      ['kind', 'template'],
      ['template_name', 'otp'],
      ['language', 'en'],
      ['body_params[0]', HIDDEN_FLOW],
      ['url_button_suffix', HIDDEN_SECRET],
    ],
    "a sign-in flow's text is held back whole",
  );
  t.notOk(JSON.stringify(otp).includes('493021'));
  t.same(
    contentFields('password.reset', { kind: 'rendered', body: 'reset: https://x/r?t=1' }).find(
      (f) => f.name === 'body',
    ),
    { name: 'body', value: HIDDEN_FLOW, hidden: true },
  );
});

t.test("a handoff's delivery ids lie in a short range after its own", async (t) => {
  // 0x0193_5f1a_2b3c ms + 10 s
  t.equal(
    handoffIdsEnd('01935f1a-2b3c-7000-8000-000000000000'),
    `${(0x01935f1a2b3c + 10_000)
      .toString(16)
      .padStart(12, '0')
      .replace(/^(.{8})(.{4})$/, '$1-$2')}-0000-0000-000000000000`,
  );
  t.ok(
    handoffIdsEnd('01935f1a-2b3c-7000-8000-000000000000') > '01935f1a-2b3c-7fff-bfff-ffffffffffff',
    'past every id of the same millisecond',
  );
});

t.test("a list's total: all shown, a page of them, or past the count's bound", async (t) => {
  const line = (n: number, atLeast: boolean, shown: number) =>
    totalLine({ id: 'c', total: { n, atLeast }, shown, one: 'rule', many: 'rules' }).value;
  t.equal(line(1, false, 1), '<p class="count-line" id="c">1 rule.</p>');
  t.equal(line(0, false, 0), '<p class="count-line" id="c">0 rules.</p>');
  t.equal(line(1234, false, 1234), '<p class="count-line" id="c">1,234 rules.</p>');
  t.equal(line(1234, false, 50), '<p class="count-line" id="c">Showing 50 of 1,234 rules.</p>');
  t.equal(
    line(10_000, true, 50),
    '<p class="count-line" id="c">Showing 50 of more than 10,000 rules.</p>',
    'a bounded count says so',
  );
});
