import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import t from 'tap';
import { signDeliveryToken } from '@ens/core';
import { retentionRound } from '@ens/core/internal';
import { startSmtpTestServer, TEST_CA_PEM } from '@ens/plugin-smtp/testing';
import {
  startTestService,
  waitFor,
  type TestClient,
  type TestService,
} from '../harness/service.ts';

/**
 * One-click unsubscribe (RFC 8058) on a running service that sends email through the SMTP plugin
 * to a real SMTP relay: the link in the List-Unsubscribe header of the email the relay received,
 * POSTed exactly as Gmail sends it, unsubscribes the recipient from the email's event type at
 * once, and the next send of that event type fails `suppressed:` without a provider call while
 * another event type still goes; the GET page never unsubscribes by itself; every link that does
 * not work gets the same 404, byte for byte; requests are limited per address.
 */

const RATE = 40;
const relay = await startSmtpTestServer({ users: { ens: 'relay-password' } });
t.teardown(() => relay.stop());
const svc: TestService = await startTestService(t, {
  env: {
    ENS_UNSUBSCRIBE_RATE_LIMIT: String(RATE),
    ENS_UNSUBSCRIBE_TTL: '30d',
    ENS_PROVIDERS: 'email=@ens/plugin-smtp',
    ENS_PROVIDER_CONFIG: JSON.stringify({
      '@ens/plugin-sandbox': { handsetDelayMs: 100 },
      '@ens/plugin-smtp': {
        host: relay.host,
        port: relay.port,
        auth: { user: 'ens', pass: 'relay-password' },
        tls: { ca: TEST_CA_PEM },
        fromAddress: 'news@acme.example',
        fromName: 'ACME News',
      },
    }),
  },
});
const client: TestClient = await svc.createClient();
await svc.tenant(client, 'news');
await svc.rt.suppressions.setPolicy(client.clientId, { bulk_event_types: ['newsletter.weekly'] });

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * One request with exactly these headers (Node adds only Host and, with a body, nothing else), from
 * a loopback address.
 */
function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Buffer,
  from = '127.0.0.1',
): Promise<Raw> {
  const url = new URL(path, svc.baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers, localAddress: from, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * The link the worker puts in the email's List-Unsubscribe header
 * (services/worker/src/send-loop.ts).
 */
const linkOf = (deliveryId: string) =>
  `/unsubscribe/${signDeliveryToken(svc.rt.consentKey, 'unsubscribe', deliveryId)}`;

function email(to: string, eventType = 'newsletter.weekly') {
  return {
    tenant: 'news',
    event_type: eventType,
    messages: [
      {
        channel: 'email',
        recipients: [to],
        content: { kind: 'rendered', subject: 'This week', body: 'News' },
      },
    ],
  };
}

async function sendAndEnd(to: string, eventType = 'newsletter.weekly'): Promise<any> {
  const r = await svc.send(client, email(to, eventType));
  if (r.status !== 202) throw new Error(`send: ${r.status} ${r.text}`);
  const id = r.body.deliveries[0].delivery_id as string;
  return waitFor(
    async () =>
      (await svc.feed(client)).find((d) => d.delivery_id === id && d.status !== 'pending'),
    15_000,
    `delivery ${id} to end`,
  );
}

const attemptRows = async (id: string) =>
  Number(
    (await svc.rt.db.query('SELECT count(*)::int AS n FROM attempts WHERE delivery_id = $1', [id]))
      .rows[0].n,
  );
const entries = async () =>
  (
    await svc.rt.db.query(
      `SELECT channel, address, scope, reason, source, delivery_id::text, detail FROM suppressions WHERE client_id = $1 ORDER BY address, scope`,
      [client.clientId],
    )
  ).rows;

t.test(
  'the POST exactly as Gmail sends it unsubscribes from that event type at once; the next such ' +
    'send fails suppressed without a provider call, another event type still goes',
  async (t) => {
    const first = await sendAndEnd('Reader@Example.com');
    t.equal(first.status, 'sent');
    t.equal(await attemptRows(first.delivery_id), 1);

    // The email as the relay received it: its List-Unsubscribe header holds the link.
    const mail = await relay.waitForMessage((m) =>
      m.envelope.rcptTo.some((r) => r.toLowerCase() === 'reader@example.com'),
    );
    t.equal(mail.headers['list-unsubscribe-post'], 'List-Unsubscribe=One-Click');
    const https = /<(https?:\/\/[^>]+)>/.exec(mail.headers['list-unsubscribe'] ?? '')?.[1];
    t.ok(https, `an http(s) link in List-Unsubscribe: ${mail.headers['list-unsubscribe']}`);
    const link = new URL(https!);
    t.equal(link.origin, svc.config.publicUrl, 'at ENS_PUBLIC_URL');
    t.equal(link.pathname, linkOf(first.delivery_id), 'the signed link of this delivery');

    const gmail = { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': '26' };
    const r = await raw('POST', link.pathname, gmail, 'List-Unsubscribe=One-Click');
    t.equal(r.status, 200);
    t.match(r.headers['content-type'], /^text\/html; charset=utf-8/);
    t.match(r.body, /You are unsubscribed/);
    t.notOk(r.headers['set-cookie'], 'no cookie');
    t.same(
      await entries(),
      [
        {
          channel: 'email',
          address: 'reader@example.com',
          scope: 'newsletter.weekly',
          reason: 'opt_out',
          source: 'unsubscribe',
          delivery_id: first.delivery_id,
          detail: 'one-click unsubscribe (RFC 8058)',
        },
      ],
      "one opt_out entry, scoped to the email's event type, naming its delivery",
    );

    const again = await raw('POST', link.pathname, gmail, 'List-Unsubscribe=One-Click');
    t.equal(again.status, 200, 'a repeat is answered 200 again');
    t.equal(again.body, r.body);
    t.equal((await entries()).length, 1, 'still one entry');

    const api = await client.call(
      'GET',
      '/v2/tenants/news/suppressions/email/reader%40example.com',
    );
    t.equal(api.status, 200);
    t.match(
      api.body.results,
      [
        {
          scope: 'newsletter.weekly',
          reason: 'opt_out',
          source: 'unsubscribe',
          delivery_id: first.delivery_id,
        },
      ],
      'the client sees it through the API',
    );

    const next = await sendAndEnd('reader@example.com');
    t.equal(next.status, 'failed');
    t.match(
      next.last_error,
      /^suppressed: reader@example\.com is on the suppression list \(opt_out for event type newsletter\.weekly, unsubscribe\) since /,
    );
    t.equal(next.attempts, 0);
    t.equal(await attemptRows(next.delivery_id), 0, 'no provider call');

    const other = await sendAndEnd('reader@example.com', 'account.notice');
    t.equal(other.status, 'sent', 'another event type to the same address is still sent');
    t.equal(await attemptRows(other.delivery_id), 1);
  },
);

t.test(
  'the GET page has a button and never unsubscribes by itself; its button, a multipart POST ' +
    'and an empty one each unsubscribe',
  async (t) => {
    const d = await sendAndEnd('scanner@example.com');
    const before = await entries();
    for (let i = 0; i < 3; i++) {
      const r = await raw('GET', linkOf(d.delivery_id), { 'User-Agent': 'LinkScanner/1.0' });
      t.equal(r.status, 200);
      t.match(r.headers['content-type'], /^text\/html; charset=utf-8/);
      t.match(r.body, /<form method="post">/, "a form that posts to the page's own URL");
      t.match(r.body, /<input type="hidden" name="List-Unsubscribe" value="One-Click">/);
      t.match(r.body, /<button type="submit">Unsubscribe<\/button>/);
      t.match(r.body, /<html lang="en">/);
    }
    const head = await raw('HEAD', linkOf(d.delivery_id), {});
    t.equal(head.status, 200, 'HEAD too');
    t.same(await entries(), before, 'three GETs and a HEAD unsubscribed nobody');

    const page = await raw('GET', linkOf(d.delivery_id), {});
    const csp = String(page.headers['content-security-policy']);
    t.match(csp, /default-src 'none'/);
    t.match(csp, /form-action 'self'/);
    t.match(csp, /frame-ancestors 'none'/);
    t.notMatch(csp, /unsafe-inline|script-src/, 'no script, no unsafe-inline');
    const style = /<style>([^<]*)<\/style>/.exec(page.body)?.[1] ?? '';
    t.ok(
      csp.includes(`'sha256-${createHash('sha256').update(style).digest('base64')}'`),
      'the inline style is allowed by its hash, and nothing else',
    );
    t.notMatch(page.body, /\s(src|href|action)=/, 'no asset, link or form target anywhere');
    t.notMatch(page.body, /<script/i);
    t.equal(page.headers['x-frame-options'], 'DENY');
    t.equal(page.headers['referrer-policy'], 'no-referrer', 'the token goes in no Referer');
    t.equal(page.headers['cache-control'], 'no-store');

    const button = await raw(
      'POST',
      linkOf(d.delivery_id),
      { 'Content-Type': 'application/x-www-form-urlencoded' },
      'List-Unsubscribe=One-Click',
    );
    t.equal(button.status, 200, "the page's button");
    t.match(await entries(), [
      ...before,
      { address: 'scanner@example.com', scope: 'newsletter.weekly', source: 'unsubscribe' },
    ]);

    const m = await sendAndEnd('multipart@example.com');
    const boundary = '----ENSboundary7MA4YWxkTrZu0gW';
    const multipart = `--${boundary}\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n--${boundary}--\r\n`;
    const mp = await raw(
      'POST',
      linkOf(m.delivery_id),
      {
        'Content-Type': `multipart/form-data; boundary=${boundary}`,
        'Content-Length': String(Buffer.byteLength(multipart)),
      },
      multipart,
    );
    t.equal(mp.status, 200, 'multipart/form-data, as RFC 8058 allows');

    const e = await sendAndEnd('empty@example.com');
    const empty = await raw('POST', linkOf(e.delivery_id), { 'Content-Length': '0' });
    t.equal(empty.status, 200, 'an empty body');
    const addresses = (await entries()).map((x: any) => x.address);
    t.ok(
      addresses.includes('multipart@example.com') && addresses.includes('empty@example.com'),
      'both unsubscribed',
    );

    const big = await raw(
      'POST',
      linkOf(e.delivery_id),
      { 'Content-Type': 'application/x-www-form-urlencoded' },
      `List-Unsubscribe=One-Click&pad=${'x'.repeat(20_000)}`,
    );
    t.equal(big.status, 413, 'a body over 16 KiB is refused');
  },
);

t.test(
  'forged, malformed, wrong-purpose, expired and retention-removed links: one 404, byte for ' +
    'byte, and nothing changed',
  async (t) => {
    // Retention removes every done handoff older than 1 ms: this one among them.
    const removed = await sendAndEnd('removed@example.com');
    await waitFor(
      async () => {
        await retentionRound({ db: svc.rt.db, logger: svc.rt.logger }, { retentionMs: 1 });
        return (
          (await svc.rt.db.query('SELECT 1 FROM deliveries WHERE id = $1', [removed.delivery_id]))
            .rows.length === 0
        );
      },
      15_000,
      'retention to remove the delivery',
    );
    const expired = await sendAndEnd('expired@example.com');
    await svc.rt.db.query(
      `UPDATE deliveries SET created_at = now() - interval '31 days' WHERE id = $1`,
      [expired.delivery_id],
    );
    const valid = await sendAndEnd('valid@example.com');

    const real = signDeliveryToken(svc.rt.consentKey, 'unsubscribe', valid.delivery_id);
    const links: Record<string, string> = {
      forged: `/unsubscribe/${randomBytes(26)
        .toString('base64url')
        .toLowerCase()
        .replace(/[^a-z2-7]/g, 'a')
        .slice(0, 42)
        .padEnd(42, 'a')}`,
      // The last character carries 3 bits of the MAC and 2 unused ones: changing either is refused.
      'forged from a real one (its last 2 unused bits set)': `/unsubscribe/${real.slice(0, -1)}${'abcdefghijklmnopqrstuvwxyz234567'['abcdefghijklmnopqrstuvwxyz234567'.indexOf(real.at(-1)!) | 3]}`,
      'forged from a real one (a MAC bit changed)': `/unsubscribe/${real.slice(0, -1)}${'abcdefghijklmnopqrstuvwxyz234567'['abcdefghijklmnopqrstuvwxyz234567'.indexOf(real.at(-1)!) ^ 4]}`,
      'forged from a real one (a character of the id changed)': `/unsubscribe/${real[0] === 'a' ? 'b' : 'a'}${real.slice(1)}`,
      malformed: '/unsubscribe/not-a-token',
      'too long': `/unsubscribe/${'a'.repeat(300)}`,
      'odd characters': '/unsubscribe/%3Cscript%3E',
      'signed for the return path': `/unsubscribe/${signDeliveryToken(svc.rt.consentKey, 'return-path', valid.delivery_id)}`,
      'signed by another key': `/unsubscribe/${signDeliveryToken(randomBytes(32), 'unsubscribe', valid.delivery_id)}`,
      expired: linkOf(expired.delivery_id),
      'removed by retention': linkOf(removed.delivery_id),
      'never sent (a random delivery id)': linkOf(randomUUID()),
    };
    const before = await entries();
    const same = { 'X-Request-Id': 'unsubscribe-oracle-check' };
    const answers: [string, Raw][] = [];
    for (const [what, link] of Object.entries(links)) {
      answers.push([`GET ${what}`, await raw('GET', link, same)]);
      answers.push([
        `POST ${what}`,
        await raw(
          'POST',
          link,
          { ...same, 'Content-Type': 'application/x-www-form-urlencoded' },
          'List-Unsubscribe=One-Click',
        ),
      ]);
    }
    const shape = (r: Raw) => {
      const { date: _date, ...headers } = r.headers;
      return { status: r.status, headers, body: r.body };
    };
    const [, reference] = answers[0]!;
    t.equal(reference.status, 404);
    t.match(reference.body, /This link does not work/);
    for (const [what, r] of answers)
      t.same(shape(r), shape(reference), `${what}: the same 404, headers and body`);
    t.same(await entries(), before, 'nothing was unsubscribed');

    const ok = await raw(
      'POST',
      `/unsubscribe/${real.toUpperCase()}`,
      { 'Content-Type': 'application/x-www-form-urlencoded' },
      'List-Unsubscribe=One-Click',
    );
    t.equal(
      ok.status,
      200,
      'the valid link works (its token read case-insensitively), so the 404s were about the links',
    );
  },
);

t.test('requests are limited per address (ENS_UNSUBSCRIBE_RATE_LIMIT a minute)', async (t) => {
  const from = '127.0.0.61';
  const link = `/unsubscribe/${'a'.repeat(42)}`;
  for (let i = 0; i < RATE; i++) {
    const r = await raw(i % 2 ? 'GET' : 'POST', link, {}, undefined, from);
    if (r.status !== 404) t.fail(`request ${i}: ${r.status}`);
  }
  const over = await raw('POST', link, {}, undefined, from);
  t.equal(over.status, 429);
  t.ok(Number(over.headers['retry-after']) >= 1, 'with Retry-After');
  t.equal(JSON.parse(over.body).code, 'ENS_ERR_RATE_LIMITED');
  const elsewhere = await raw('POST', link, {}, undefined, '127.0.0.62');
  t.equal(elsewhere.status, 404, 'another address is not held back');
});
