import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { freePort } from '@ens/local-engines';
import { returnPathFor } from '@ens/core';
import { TEST_CA_PEM, TEST_SERVER_CERT_PEM, TEST_SERVER_KEY_PEM } from '@ens/plugin-smtp/testing';
import { startPostfix } from '../harness/postfix.ts';
import { startTestService, uniqueKey, waitFor } from '../harness/service.ts';
import { SmtpTalk } from '../harness/smtp-talk.ts';

/*
 * Bounces by mail end to end, with Debian's Postfix as the relay: ENS's SMTP plugin sends a
 * newsletter through Postfix to a user Postfix does not have; Postfix takes it, its local delivery
 * refuses the user, and Postfix writes its own RFC 3464 DSN to the envelope sender, which is the
 * delivery's signed return path; Postfix relays the DSN (over STARTTLS) to ENS's inbound role,
 * which suppresses the address and marks the delivery bounced, still `sent`. The next newsletter to
 * that address fails `suppressed:` without an SMTP conversation. A recipient Postfix refuses at
 * RCPT TO is a recipient refusal. Skipped, saying why, only where Postfix cannot be installed or
 * run (.ci/run installs it).
 */

const DOMAIN = 'bounces.ens-test.invalid';
const LOCAL = 'mail.ens-test.invalid';
const STRICT = 'strict.ens-test.invalid';

const inboundPort = await freePort();
const postfixPort = await freePort();
// The inbound role offers STARTTLS with the SMTP plugin's test certificate (127.0.0.1, localhost).
const certDir = await mkdtemp(path.join(tmpdir(), 'ens-inbound-tls-'));
t.teardown(() => rm(certDir, { recursive: true, force: true }));
await writeFile(path.join(certDir, 'cert.pem'), TEST_SERVER_CERT_PEM);
await writeFile(path.join(certDir, 'key.pem'), TEST_SERVER_KEY_PEM);

const svc = await startTestService(t, {
  env: {
    ENS_PROVIDERS: 'email=@ens/plugin-smtp',
    ENS_PROVIDER_CONFIG: JSON.stringify({
      '@ens/plugin-smtp': {
        host: '127.0.0.1',
        port: postfixPort,
        requireTLS: false,
        fromAddress: 'news@acme.example',
        fromName: 'ACME News',
        timeoutMs: 10_000,
      },
    }),
    ENS_RETURN_PATH_DOMAIN: DOMAIN,
    ENS_INBOUND_PORT: String(inboundPort),
    ENS_INBOUND_TLS_CERT: path.join(certDir, 'cert.pem'),
    ENS_INBOUND_TLS_KEY: path.join(certDir, 'key.pem'),
  },
  roles: ['api', 'worker', 'callbacks', 'feed', 'inbound'],
});
const client = await svc.createClient();
await svc.tenant(client, 'acme');

const postfix = await startPostfix({
  port: postfixPort,
  localDomain: LOCAL,
  strictDomain: STRICT,
  routes: { [DOMAIN]: inboundPort },
  tlsToRoutes: true,
});
if (typeof postfix !== 'string') t.teardown(() => postfix.stop());
const skip = typeof postfix === 'string' ? postfix : false;

const newsletter = (recipient: string) =>
  svc.send(
    client,
    {
      tenant: 'acme',
      event_type: 'newsletter.weekly',
      messages: [
        {
          channel: 'email',
          recipients: [recipient],
          content: {
            kind: 'rendered',
            subject: 'This week at ACME',
            body: 'News',
            html: '<p>News</p>',
          },
        },
      ],
    },
    uniqueKey('consent-email'),
  );

const row = async (id: string) =>
  (
    await svc.rt.db.query(
      'SELECT status, last_error, bounced_at, complained_at, attempts FROM deliveries WHERE id ' +
        '= $1',
      [id],
    )
  ).rows[0];
const attemptRows = async (id: string) =>
  Number(
    (await svc.rt.db.query('SELECT count(*)::int AS n FROM attempts WHERE delivery_id = $1', [id]))
      .rows[0].n,
  );
const entriesFor = async (address: string) =>
  (await svc.rt.suppressions.list(client.clientId, 'acme', { channel: 'email', address })).results;

t.test(
  'Postfix bounces an unknown user; its DSN suppresses the address; the next send makes no ' +
    'SMTP conversation',
  { skip },
  async (t) => {
    const pf = postfix as Exclude<typeof postfix, string>;
    const address = `nosuchuser@${LOCAL}`;
    const first = await newsletter(address);
    t.equal(first.status, 202);
    const id: string = first.body.deliveries[0].delivery_id;
    const returnPath = returnPathFor(svc.rt.consentKey, DOMAIN, id);

    await waitFor(
      async () => (await row(id)).status === 'sent',
      15_000,
      'Postfix took the message',
    );
    await pf.waitForLog(new RegExp(`qmgr.*: from=<${returnPath}>`));
    t.pass('Postfix got the message from the signed return path (MAIL FROM)');
    await pf.waitForLog(/local.*status=bounced \(unknown user: "nosuchuser"\)/);
    t.pass("Postfix's local delivery refused the unknown user");
    const relayed = await pf.waitForLog(
      new RegExp(
        `smtp.*to=<${returnPath}>, relay=127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${inboundPort}.*status=sent \\(250 2\\.6\\.0 Recorded \\(hard_bounce\\)\\)`,
      ),
    );
    t.ok(
      relayed,
      "Postfix delivered its DSN to ENS's inbound role, which answered that it recorded a hard " +
        'bounce',
    );
    t.match(
      await pf.log(),
      new RegExp(
        `TLS connection established to 127\\.0\\.0\\.1\\[127\\.0\\.0\\.1\\]:${inboundPort}`,
      ),
      'over STARTTLS',
    );

    const [entry] = await waitFor(
      async () => {
        const e = await entriesFor(address);
        return e.length > 0 ? e : undefined;
      },
      10_000,
      'the suppression entry',
    );
    t.match(entry, {
      reason: 'hard_bounce',
      source: 'bounce_mail',
      scope: '*',
      delivery_id: id,
      provider: 'smtp',
    });
    t.match(
      entry?.detail,
      /^failed 5\.1\.1 for nosuchuser@mail\.ens-test\.invalid: X-Postfix; unknown user: "nosuchuser" \(Reporting-MTA dns; relay\.ens-test\.invalid\)$/,
      "Postfix's own words are the evidence",
    );
    const bounced = await row(id);
    t.equal(bounced.status, 'sent', 'the delivery stays sent');
    t.ok(bounced.bounced_at instanceof Date, 'bounced_at is set');
    const feedRow = await waitFor(
      async () => (await svc.feed(client)).find((r) => r.delivery_id === id && r.bounced_at),
      10_000,
      'the feed shows the bounce',
    );
    t.equal(feedRow.status, 'sent');

    const messagesBefore = ((await pf.log()).match(/smtpd\[\d+\]: [0-9A-F]+: client=/g) ?? [])
      .length;
    t.equal(messagesBefore, 1, 'Postfix has taken one message from ENS so far');
    const second = await newsletter(address);
    const id2: string = second.body.deliveries[0].delivery_id;
    const failed = await waitFor(
      async () => {
        const r = await row(id2);
        return r.status === 'failed' ? r : undefined;
      },
      15_000,
      'the second delivery ends',
    );
    t.match(
      failed.last_error,
      /^suppressed: nosuchuser@mail\.ens-test\.invalid is on the suppression list \(hard_bounce, bounce_mail\) since .*: failed 5\.1\.1/,
    );
    t.equal(await attemptRows(id2), 0, 'no provider call');
    await new Promise((r) => setTimeout(r, 500));
    const log = await pf.log();
    t.equal(
      (log.match(/smtpd\[\d+\]: [0-9A-F]+: client=/g) ?? []).length,
      1,
      'Postfix took no second message',
    );
    t.notOk(
      log.includes(returnPathFor(svc.rt.consentKey, DOMAIN, id2)),
      "the second delivery's return path never reached Postfix",
    );
  },
);

t.test(
  'a recipient Postfix refuses at RCPT TO (550 5.1.1) is a recipient refusal: failed, ' +
    'suppressed, no DSN',
  { skip },
  async (t) => {
    const pf = postfix as Exclude<typeof postfix, string>;
    const address = `nobody@${STRICT}`;
    const r = await newsletter(address);
    const id: string = r.body.deliveries[0].delivery_id;
    const failed = await waitFor(
      async () => {
        const x = await row(id);
        return x.status === 'failed' ? x : undefined;
      },
      15_000,
      'the delivery fails',
    );
    t.match(
      failed.last_error,
      /^smtp 550 5\.1\.1 <nobody@strict\.ens-test\.invalid>: Recipient address rejected: User unknown in virtual mailbox table/,
    );
    t.match(
      await entriesFor(address),
      [{ reason: 'hard_bounce', source: 'provider', delivery_id: id }],
      'suppressed as a hard bounce by the refusal itself',
    );
    t.equal(failed.bounced_at, null, 'no bounce by mail: Postfix refused it in the conversation');
    await pf.waitForLog(/NOQUEUE: reject: RCPT from .*nobody@strict\.ens-test\.invalid/);
  },
);

t.test('the inbound role offers STARTTLS with the configured certificate', async (t) => {
  const talk = await SmtpTalk.open(inboundPort);
  t.equal(talk.greeting.code, 220);
  const ehlo = await talk.command('EHLO client.ens-test.invalid');
  t.match(ehlo.text, /STARTTLS/, 'EHLO announces STARTTLS');
  t.equal(
    (await talk.startTls(TEST_CA_PEM, 'localhost')).code,
    220,
    'STARTTLS, then a handshake that verifies against the test CA',
  );
  const again = await talk.command('EHLO client.ens-test.invalid');
  t.equal(again.code, 250, 'EHLO again inside TLS');
  t.notMatch(again.text, /STARTTLS/, 'no second STARTTLS');
  t.equal((await talk.command('MAIL FROM:<>')).code, 250);
  t.equal(
    (await talk.command(`RCPT TO:<b${'a'.repeat(42)}@${DOMAIN}>`)).code,
    550,
    'a forged return path is refused inside TLS too',
  );
  const id = (await newsletter(`tls-reader@${LOCAL}`)).body.deliveries[0].delivery_id as string;
  t.equal(
    (await talk.command(`RCPT TO:<${returnPathFor(svc.rt.consentKey, DOMAIN, id)}>`)).code,
    250,
    'a signed one is taken',
  );
  const data = await talk.data('From: someone@example.org\nSubject: hello\n\nnot a report\n');
  t.equal(data.code, 550, 'and a message that is not a report is refused after DATA');
  await talk.quit();
});
