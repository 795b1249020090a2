import { randomUUID } from 'node:crypto';
import t from 'tap';
import { returnPathFor, signDeliveryToken, unsubscribeMailtoFor } from '@ens/core';
import { sendOnce, SmtpTalk } from '../../../test/harness/smtp-talk.ts';
import {
  ordinaryMail,
  postfixUnknownUser,
  rfc5965Abuse,
  yahooComplaint,
  type Parties,
} from './fixtures.ts';
import { DOMAIN, FEEDBACK, startInboundService, type SentDelivery } from './inbound-service.ts';

/*
 * What the inbound role refuses, and that refusing changes nothing: forged return paths never get
 * past RCPT TO, a message over the size limit is refused while it is read, a report ENS cannot act
 * on is refused after DATA with no entry and no mark on any delivery, a flooding peer is cut off
 * while others are still served, and an idle connection is closed. Each test speaks from its own
 * loopback address (127.0.0.x), a peer of its own with its own budget.
 */

const MAX = 64 * 1024;
const ib = await startInboundService(t, {
  ENS_INBOUND_MAX_MESSAGE_BYTES: String(MAX),
  ENS_INBOUND_PEER_RATE_LIMIT: '30',
  ENS_INBOUND_TIMEOUT: '3s',
});
const key = ib.svc.rt.consentKey;

let n = 0;
const fresh = (): Promise<SentDelivery> => ib.sentDelivery(`someone${++n}@example.org`);
const parties = (d: SentDelivery, to?: string): Parties => ({
  returnPath: d.returnPath,
  recipient: d.recipient,
  ...(to ? { to } : {}),
});

/** Everything a report could change: the list and the deliveries' marks. */
async function state(): Promise<string> {
  const marks = await ib.svc.rt.db.query(
    'SELECT count(*) FILTER (WHERE bounced_at IS NOT NULL OR complained_at IS NOT NULL)::int ' +
      "AS n FROM deliveries WHERE status = 'sent'",
  );
  return JSON.stringify({ entries: await ib.entries(), marks: marks.rows[0].n });
}

async function metric(name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${ib.svc.baseUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

t.test('forged and altered return paths are refused at RCPT TO, before any message', async (t) => {
  const d = await fresh();
  const token = d.returnPath.slice(1, d.returnPath.indexOf('@'));
  const flip = (s: string, i: number) =>
    s.slice(0, i) + (s[i] === 'a' ? 'b' : 'a') + s.slice(i + 1);
  const forged = [
    `b${'a'.repeat(42)}@${DOMAIN}`,
    `b${flip(token, 5)}@${DOMAIN}`,
    `b${flip(token, token.length - 1)}@${DOMAIN}`,
    `b${token}x@${DOMAIN}`,
    `b${token}@elsewhere.example`,
    `b${signDeliveryToken(key, 'unsubscribe', d.id)}@${DOMAIN}`,
    `u${token}@${DOMAIN}`,
    `b${token.slice(0, 30)}@${DOMAIN}`,
    `postmaster@${DOMAIN}`,
    `abuse@${DOMAIN}`,
    d.recipient,
    `${returnPathFor(Buffer.alloc(32, 7), DOMAIN, d.id)}`,
  ];
  const before = await state();
  const refusedBefore = await metric(
    'ens_inbound_refusals_total',
    'stage="rcpt",reason="unknown_recipient"',
  );
  for (const to of forged) {
    const r = await sendOnce(ib.port, {
      from: '',
      to: [to],
      message: postfixUnknownUser({ ...parties(d), returnPath: to }),
      peer: '127.0.0.2',
    });
    t.equal(r.rcpt[0]?.code, 550, `${to}: 550 at RCPT TO`);
    t.match(r.rcpt[0]?.text, /^5\.1\.1 /, 'with 5.1.1');
    t.equal(r.data, null, 'no DATA');
  }
  t.equal(
    (await metric('ens_inbound_refusals_total', 'stage="rcpt",reason="unknown_recipient"')) -
      refusedBefore,
    forged.length,
    'each refusal is counted',
  );
  t.equal(await state(), before, 'nothing recorded');
  const ok = await sendOnce(ib.port, {
    from: '',
    to: [d.returnPath.toUpperCase()],
    message: postfixUnknownUser(parties(d)),
    peer: '127.0.0.2',
  });
  t.equal(ok.rcpt[0]?.code, 250, 'the genuine return path is taken, whatever its case');
  t.equal(ok.data?.code, 250);
});

t.test(
  'a message over the size limit is refused with 552, declared or not, and the listener goes on',
  async (t) => {
    const d = await fresh();
    const before = await state();
    const tooBigBefore = await metric('ens_inbound_messages_total', 'result="too_large"');
    const padding = `X-Padding: ${'x'.repeat(900)}\n`.repeat(Math.ceil((MAX * 2) / 912));
    const huge = postfixUnknownUser(parties(d)).replace(
      'MIME-Version: 1.0\n',
      `MIME-Version: 1.0\n${padding}`,
    );
    const r = await sendOnce(ib.port, {
      from: '',
      to: [d.returnPath],
      message: huge,
      peer: '127.0.0.3',
    });
    t.equal(r.data?.code, 552, `552 after DATA (${r.data?.text})`);
    t.match(r.data?.text, /^5\.3\.4 /);
    t.equal(
      (await metric('ens_inbound_messages_total', 'result="too_large"')) - tooBigBefore,
      1,
      'counted as too_large',
    );

    const talk = await SmtpTalk.open(ib.port, { from: '127.0.0.3' });
    const ehlo = await talk.command('EHLO test.client.invalid');
    t.match(ehlo.text, new RegExp(`SIZE ${MAX}`), 'the limit is advertised (SIZE)');
    const declared = await talk.command(`MAIL FROM:<> SIZE=${MAX * 10}`);
    t.equal(
      declared.code,
      552,
      `a declared SIZE over the limit is refused at MAIL FROM (${declared.text})`,
    );
    await talk.quit();

    t.equal(await state(), before, 'nothing recorded');
    const ok = await sendOnce(ib.port, {
      from: '',
      to: [d.returnPath],
      message: postfixUnknownUser(parties(d)),
      peer: '127.0.0.3',
    });
    t.equal(ok.data?.code, 250, 'the next message is taken');
  },
);

t.test('reports ENS cannot act on are refused after DATA and change nothing', async (t) => {
  const d = await fresh();
  const p = parties(d);
  const dsn = postfixUnknownUser(p);
  const unknown = returnPathFor(key, DOMAIN, randomUUID());
  const cases: [string, string, string, number, string][] = [
    [
      'ordinary mail to a return path (an auto-reply)',
      d.returnPath,
      ordinaryMail({ from: d.recipient, to: d.returnPath }),
      550,
      'not_report',
    ],
    [
      'a DSN without any recipient block',
      d.returnPath,
      dsn.replace(/Final-Recipient[\s\S]*?(?=\n\n--)/, ''),
      554,
      'malformed',
    ],
    [
      'a DSN whose Status is not an RFC 3463 code',
      d.returnPath,
      dsn.replace('Status: 5.1.1', 'Status: 5.1'),
      554,
      'malformed',
    ],
    ['a DSN with no Action', d.returnPath, dsn.replace('Action: failed\n', ''), 554, 'malformed'],
    [
      'a delivery-status report without its message/delivery-status part',
      d.returnPath,
      dsn.replace('Content-Type: message/delivery-status', 'Content-Type: text/plain'),
      550,
      'not_report',
    ],
    [
      'a success notice (Action delivered)',
      d.returnPath,
      dsn.replace('Action: failed', 'Action: delivered').replace('Status: 5.1.1', 'Status: 2.0.0'),
      550,
      'not_actionable',
    ],
    [
      'a report of an unknown type',
      d.returnPath,
      dsn.replace('report-type=delivery-status', 'report-type=disposition-notification'),
      550,
      'not_report',
    ],
    [
      'a DSN to the feedback address',
      FEEDBACK,
      postfixUnknownUser({ ...p, to: FEEDBACK }),
      550,
      'not_report',
    ],
    [
      'an ARF without Feedback-Type',
      d.returnPath,
      rfc5965Abuse(p).replace('Feedback-Type: abuse\n', ''),
      554,
      'malformed',
    ],
    [
      'an ARF saying not-spam',
      FEEDBACK,
      yahooComplaint({ ...p, to: FEEDBACK, feedbackType: 'not-spam' }),
      550,
      'not_actionable',
    ],
    [
      'an ARF to the feedback address quoting a forged return path',
      FEEDBACK,
      yahooComplaint({ ...p, to: FEEDBACK, returnPath: `b${'q'.repeat(42)}@${DOMAIN}` }),
      550,
      'unknown_delivery',
    ],
    [
      'a signed return path of a delivery that does not exist',
      unknown,
      postfixUnknownUser({ ...p, returnPath: unknown }),
      550,
      'unknown_delivery',
    ],
    [
      'an unsubscribe mailto of a delivery that does not exist',
      unsubscribeMailtoFor(key, DOMAIN, randomUUID()),
      ordinaryMail({ from: d.recipient, to: 'x' }),
      550,
      'unknown_delivery',
    ],
    [
      'a multipart/report with an unterminated boundary and no parts',
      d.returnPath,
      'Content-Type: multipart/report; report-type=delivery-status; ' +
        'boundary="zz"\n\n--zz\nContent-Type: message/delivery-status\n',
      554,
      'malformed',
    ],
    ['no headers at all', d.returnPath, '\n\n\n', 550, 'not_report'],
    [
      'binary noise',
      d.returnPath,
      Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7919) % 256)).toString('latin1'),
      550,
      'not_report',
    ],
  ];
  const before = await state();
  for (const [i, [name, to, message, code, result]] of cases.entries()) {
    const counted = await metric('ens_inbound_messages_total', `result="${result}"`);
    const r = await sendOnce(ib.port, { from: '', to: [to], message, peer: `127.0.1.${i + 1}` });
    t.equal(r.rcpt[0]?.code, 250, `${name}: taken at RCPT TO (a signed address)`);
    t.equal(r.data?.code, code, `${name}: ${code} after DATA (${r.data?.text})`);
    t.equal(
      (await metric('ens_inbound_messages_total', `result="${result}"`)) - counted,
      1,
      `${name}: counted as ${result}`,
    );
  }
  t.equal(await state(), before, 'no entry written, no delivery marked');
  t.same(
    await ib.row(d.id),
    { status: 'sent', bounced_at: null, complained_at: null },
    'the delivery is untouched',
  );
});

t.test('one recipient per message: a second RCPT TO is deferred with 452', async (t) => {
  const a = await fresh();
  const b = await fresh();
  const talk = await SmtpTalk.open(ib.port, { from: '127.0.0.5' });
  await talk.command('EHLO test.client.invalid');
  const r = await talk.send({
    from: '',
    to: [a.returnPath, b.returnPath],
    message: postfixUnknownUser(parties(a)),
  });
  t.same(
    r.rcpt.map((x) => x.code),
    [250, 452],
    'the second recipient is asked to come again alone',
  );
  t.equal(r.data?.code, 250, 'the message is taken for the first');
  const again = await talk.send({
    from: '',
    to: [b.returnPath],
    message: postfixUnknownUser(parties(b)),
  });
  t.equal(again.data?.code, 250, 'and the second in its own transaction');
  await talk.quit();
  t.ok((await ib.row(a.id)).bounced_at && (await ib.row(b.id)).bounced_at, 'both bounced');
});

t.test('a flooding peer is cut off with 421 while another peer is still served', async (t) => {
  const d = await fresh();
  const limitedBefore = await metric(
    'ens_inbound_refusals_total',
    'stage="connect",reason="rate_limited"',
  );
  const greetings: number[] = [];
  // 40 connections in quick succession from one peer, against a budget of 30 a minute.
  for (let i = 0; i < 40; i++) {
    const talk = await SmtpTalk.open(ib.port, { from: '127.0.0.6' });
    greetings.push(talk.greeting.code);
    await talk.quit();
  }
  t.equal(greetings.filter((c) => c === 220).length, 30, 'the first 30 are greeted');
  t.ok(
    greetings.slice(30).every((c) => c === 421),
    `the rest get 421 (${greetings.slice(30).join(',')})`,
  );
  t.equal(
    (await metric('ens_inbound_refusals_total', 'stage="connect",reason="rate_limited"')) -
      limitedBefore,
    10,
    'each is counted',
  );
  const flooded = await SmtpTalk.open(ib.port, { from: '127.0.0.6' });
  t.match(flooded.greeting, { code: 421, text: /^4\.7\.0 / }, 'the flooding peer is still refused');
  await flooded.quit();

  const other = await sendOnce(ib.port, {
    from: '',
    to: [d.returnPath],
    message: postfixUnknownUser(parties(d)),
    peer: '127.0.0.7',
  });
  t.equal(other.greeting.code, 220, 'another peer is greeted');
  t.equal(other.data?.code, 250, 'and its report is recorded');
  t.ok((await ib.row(d.id)).bounced_at);
});

t.test(
  'messages count against the budget too: a peer that keeps one connection gets 421 at MAIL FROM',
  async (t) => {
    const d = await fresh();
    const talk = await SmtpTalk.open(ib.port, { from: '127.0.0.8' });
    await talk.command('EHLO test.client.invalid');
    const codes: number[] = [];
    for (let i = 0; i < 35; i++) {
      const mail = await talk.command('MAIL FROM:<>');
      codes.push(mail.code);
      if (mail.code !== 250) break;
      await talk.command('RSET');
    }
    await new Promise((r) => setTimeout(r, 200));
    t.equal(
      codes.filter((c) => c === 250).length,
      29,
      'the connection and 29 messages spend the 30',
    );
    t.equal(codes.at(-1), 421, 'then MAIL FROM is answered 421');
    t.ok(talk.closed, 'and the connection is closed');
    await talk.quit();
    const other = await sendOnce(ib.port, {
      from: '',
      to: [d.returnPath],
      message: postfixUnknownUser(parties(d)),
      peer: '127.0.0.9',
    });
    t.equal(other.data?.code, 250, 'another peer is served');
  },
);

t.test('a peer holds at most 10 connections open at once', async (t) => {
  const held: SmtpTalk[] = [];
  for (let i = 0; i < 10; i++) held.push(await SmtpTalk.open(ib.port, { from: '127.0.0.10' }));
  t.ok(
    held.every((h) => h.greeting.code === 220),
    'ten are greeted',
  );
  const eleventh = await SmtpTalk.open(ib.port, { from: '127.0.0.10' });
  t.match(
    eleventh.greeting,
    { code: 421, text: /too many open connections/i },
    'the eleventh is refused',
  );
  await eleventh.quit();
  await held[0]!.quit();
  await new Promise((r) => setTimeout(r, 200));
  const next = await SmtpTalk.open(ib.port, { from: '127.0.0.10' });
  t.equal(next.greeting.code, 220, 'once one closed, another is taken');
  for (const h of [...held.slice(1), next]) await h.quit();
});

t.test('an idle connection is closed after ENS_INBOUND_TIMEOUT; AUTH is not offered', async (t) => {
  const talk = await SmtpTalk.open(ib.port, { from: '127.0.0.11' });
  const ehlo = await talk.command('EHLO test.client.invalid');
  t.notMatch(ehlo.text, /AUTH/, 'no AUTH in EHLO');
  t.notMatch(ehlo.text, /STARTTLS/, 'no STARTTLS without a configured certificate');
  t.equal((await talk.command('AUTH PLAIN AGFhAGI=')).code >= 500, true, 'AUTH is refused');
  const started = Date.now();
  while (!talk.closed && Date.now() - started < 10_000)
    await new Promise((r) => setTimeout(r, 100));
  t.ok(talk.closed, `closed after ${Date.now() - started} ms idle`);
  t.ok(Date.now() - started >= 2_500, 'not before the timeout');
});
