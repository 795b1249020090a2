import t from 'tap';
import { SchedulingStore } from '@ens/core';
import { smsHandoff, startTestService, waitFor } from '../../../test/harness/service.ts';
import { ConsoleBrowser, signInDirectly } from './console-session.ts';

/**
 * A deployment whose workers are all gone: the api process alone accepts handoffs that nobody
 * sends. The dashboard's Backlog panel shows the sms work waiting, and once it has waited past the
 * threshold the dashboard says so at the top.
 */

const svc = await startTestService(t, {
  roles: ['api'],
  env: {
    // Discovery happens at the first sign-in through the provider, which this test never does.
    ENS_OPS_ISSUER: 'http://127.0.0.1:9',
    ENS_OPS_CLIENT_ID: 'ens-console',
    ENS_OPS_CLIENT_SECRET: 'console-secret',
    ENS_OPS_SUPERUSERS: 'boss@example.com',
  },
});
const rt = svc.rt;
const b = new ConsoleBrowser(svc.baseUrl);
await signInDirectly(rt, b, { subject: 'sub-boss', email: 'boss@example.com' });

function backlogRow(page: string, channel: string): string {
  const table = /<table id="backlog-ages">([\s\S]*?)<\/table>/.exec(page)?.[1];
  if (!table) throw new Error('no backlog table on the dashboard');
  return new RegExp(`<tr data-channel="${channel}"[^>]*>[\\s\\S]*?</tr>`).exec(table)![0];
}

function deliverySeconds(row: string): number {
  return Number(/<td class="num" data-kind="delivery" data-seconds="(\d+)">/.exec(row)![1]);
}

const c = await svc.createClient({ name: 'backlog' });
await svc.tenant(c, 'stuck');
const sent = await svc.send(c, smsHandoff('stuck', ['+15554440001']));
t.equal(sent.status, 202);

t.test('with no worker, the sms delivery waits and the panel shows its age', async (t) => {
  await new Promise((r) => setTimeout(r, 2_000));
  const page = await b.get('/ops/');
  t.equal(page.status, 200);
  t.match(
    page.text,
    /<section id="backlog" aria-labelledby="backlog-h">[\s\S]*<caption>Oldest waiting work per channel<\/caption>/,
  );
  t.match(page.text, /no worker is taking it: check the worker processes' <code>\/readyz<\/code>/);
  const sms = backlogRow(page.text, 'sms');
  t.ok(deliverySeconds(sms) >= 1, `sms delivery age ${deliverySeconds(sms)} s`);
  t.match(sms, /data-kind="delivery" data-seconds="\d+">\d+ s<\/td>/, 'a young age in seconds');
  t.notMatch(sms, /class="aging"/);
  t.match(
    sms,
    /<span class="muted">none waiting<\/span><\/td><td><span class="badge status-sent">/,
    'no callback waits',
  );
  t.match(
    backlogRow(page.text, 'email'),
    /data-kind="delivery" data-seconds="0"><span class="muted">none waiting/,
  );
  t.notMatch(page.text, /id="backlog-warning"/, 'under the threshold: no warning');
});

t.test('past the threshold, the dashboard warns and names the channel', async (t) => {
  await rt.db.query(
    `UPDATE deliveries SET next_attempt_at = now() - interval '5 minutes' WHERE client_id = $1`,
    [c.clientId],
  );
  const page = await b.get('/ops/');
  const sms = backlogRow(page.text, 'sms');
  t.match(sms, /^<tr data-channel="sms" class="aging">/);
  t.ok(deliverySeconds(sms) >= 300, 'five minutes');
  t.match(sms, /<strong class="error-text">5 min( \d+ s)?<\/strong>/);
  t.match(sms, /<span class="badge status-failed">waiting over 1 min<\/span>/);
  t.notMatch(backlogRow(page.text, 'email'), /class="aging"/);
  t.match(
    page.text,
    /<p class="warning" id="backlog-warning"><strong>Work is waiting and no worker is taking it.<\/strong> On sms, /,
  );
  // The warning sits above the panels, where it is seen first.
  t.ok(page.text.indexOf('id="backlog-warning"') < page.text.indexOf('id="alerts-firing"'));
  const summary = JSON.parse((await b.get('/ops/api/summary')).text);
  t.same(summary.backlog_age.aging, ['sms']);
  t.equal(summary.backlog_age.warn_seconds, 60);
});

t.test('once the work is claimed, the warning goes', async (t) => {
  // What a worker's claim does to the row: a lease.
  await rt.db.query(
    `UPDATE deliveries SET lease_until = now() + interval '1 minute' WHERE client_id = $1`,
    [c.clientId],
  );
  const page = await waitFor(
    async () => {
      const p = await b.get('/ops/');
      return p.text.includes('id="backlog-warning"') ? null : p;
    },
    5_000,
    'the warning to go',
  );
  t.match(backlogRow(page.text, 'sms'), /data-kind="delivery" data-seconds="0"/);
});

t.test(
  'the fair delivery panel shows whose deliveries wait, with their weights, and each paced ' +
    'provider',
  async (t) => {
    const big = await svc.createClient({ name: 'newsletters' });
    await svc.tenant(big, 'retail');
    const recipients = Array.from({ length: 30 }, (_, i) => `+1555333${String(2000 + i)}`);
    t.equal((await svc.send(big, smsHandoff('retail', recipients))).status, 202);
    await new SchedulingStore(rt.db).setClient(big.clientId, {
      weight: 4,
      priorityEventTypes: ['otp.*'],
    });
    await new SchedulingStore(rt.db).setTenant(big.clientId, 'retail', 2);
    // What a worker's pacer leaves behind: the pace and the sends it has booked ahead.
    await rt.db.query('SELECT * FROM ens_reserve_sends($1, $2, $3, $4, $5)', [
      'twilio',
      50,
      20,
      100,
      2_000,
    ]);

    const page = await b.get('/ops/');
    t.match(page.text, /<section id="fair-delivery" aria-labelledby="fair-delivery-h">/);
    const row =
      new RegExp(
        `<tr data-client="${big.clientId}" data-tenant="retail" data-channel="sms">[\\s\\S]*?</tr>`,
      ).exec(page.text)?.[0] ?? '';
    t.match(
      row,
      /<td><a href="\/ops\/clients\/[^"]+" class="clip" title="[^"]+">newsletters<\/a><\/td><td><span class="clip" title="retail">retail<\/span><\/td><td>sms<\/td><td class="num" data-waiting="30">30<\/td>/,
      "the client's 30 waiting sms",
    );
    t.match(
      row,
      /<td class="num">4<\/td><td class="num">2<\/td><td><span class="clip" title="otp\.\*">otp\.\*<\/span><\/td>/,
      'with the weights and priority event types set for it',
    );
    const waiting = [...page.text.matchAll(/data-waiting="(\d+)"/g)].map((m) => Number(m[1]));
    t.same(
      waiting,
      [...waiting].sort((a, b) => b - a),
      'largest backlog first',
    );
    const pace = /<tr data-provider="twilio">[\s\S]*?<\/tr>/.exec(page.text)?.[0] ?? '';
    t.match(pace, /data-pace="50">50\/s<\/td>/, 'the paced provider and its pace');
    t.match(pace, /<td class="num">\d+\.\d s<\/td>/, 'and how far ahead its sends are booked');
  },
);
