import t from 'tap';
import { sendOnce } from '../../../test/harness/smtp-talk.ts';
import { waitFor } from '../../../test/harness/service.ts';
import {
  gmailNoSuchUser,
  microsoftJmrpComplaint,
  microsoftRecipientNotFound,
  postfixUnknownUser,
  rfc3464Delayed,
  rfc3464MultiRecipient,
  rfc3464Simple,
  rfc5965Abuse,
  unsubscribeMail,
  yahooComplaint,
  type Parties,
} from './fixtures.ts';
import { FEEDBACK, startInboundService, type SentDelivery } from './inbound-service.ts';

/*
 * Reports in the forms the RFCs and the mailbox providers publish, sent over a real SMTP
 * conversation to the inbound role of a running ENS: each becomes the suppression entry it stands
 * for, and a bounce or complaint is marked on its delivery, which stays `sent`.
 */

const ib = await startInboundService(t);

let n = 0;
const fresh = async (eventType?: string): Promise<SentDelivery> =>
  ib.sentDelivery(`reader${++n}@example.org`, eventType);
const parties = (d: SentDelivery, to?: string): Parties => ({
  returnPath: d.returnPath,
  recipient: d.recipient,
  ...(to ? { to } : {}),
});

/** Sends a report the way an MTA sends a bounce: from the null sender. */
const deliver = (to: string, message: string, from = '') =>
  sendOnce(ib.port, { from, to: [to], message });

const entryFor = async (d: SentDelivery) =>
  (await ib.entries()).filter((e) => e.address === d.recipient);

t.test(
  'delivery status notifications become bounces of their delivery; the delivery stays sent',
  async (t) => {
    const cases: [string, (p: Parties) => string, 'hard_bounce' | 'soft_bounce', RegExp][] = [
      [
        'RFC 3464 C.1 simple DSN (failed 4.0.0 after five days)',
        rfc3464Simple,
        'soft_bounce',
        /^failed 4\.0\.0 for .*: smtp; 426 connection timed out \(Reporting-MTA dns; cs\.utk\.edu\)$/,
      ],
      [
        'RFC 3464 C.2 multi-recipient DSN (5.0.0 with a comment, folded diagnostic)',
        rfc3464MultiRecipient,
        'hard_bounce',
        /^failed 5\.0\.0 for .*: smtp; 550 '.*' is not a registered gateway user/,
      ],
      [
        "Postfix's unknown local user",
        postfixUnknownUser,
        'hard_bounce',
        /^failed 5\.1\.1 for .*: X-Postfix; unknown user: "nosuchuser"/,
      ],
      [
        "Gmail's address not found",
        gmailNoSuchUser,
        'hard_bounce',
        /^failed 5\.1\.1 .*550-5\.1\.1 The email account that you tried to reach does not exist.*NoSuchUser/,
      ],
      [
        "Microsoft 365's recipient not found",
        microsoftRecipientNotFound,
        'hard_bounce',
        /^failed 5\.1\.10 .*RESOLVER\.ADR\.RecipientNotFound/,
      ],
    ];
    for (const [name, fixture, kind, detail] of cases) {
      const d = await fresh();
      const r = await deliver(d.returnPath, fixture(parties(d)));
      t.equal(r.rcpt[0]?.code, 250, `${name}: the signed return path is taken at RCPT TO`);
      t.equal(r.data?.code, 250, `${name}: 250 after DATA (${r.data?.text})`);
      const entries = await entryFor(d);
      t.equal(entries.length, 1, `${name}: one entry`);
      t.match(
        entries[0],
        { reason: kind, source: 'bounce_mail', scope: '*', delivery_id: d.id },
        `${name}: ${kind} from bounce_mail, naming the delivery`,
      );
      t.match(entries[0]?.detail, detail, `${name}: the report's own words are the evidence`);
      if (kind === 'soft_bounce')
        t.ok(entries[0]?.expires_at, `${name}: a soft bounce holds for a while`);
      else t.equal(entries[0]?.expires_at, null, `${name}: a hard bounce holds until removed`);
      const row = await ib.row(d.id);
      t.equal(row.status, 'sent', `${name}: the delivery is still sent`);
      t.ok(row.bounced_at instanceof Date, `${name}: bounced_at is set`);
      t.equal(row.complained_at, null);
    }
  },
);

t.test(
  'a delay warning (RFC 3464 C.3, Action delayed) is not a bounce: refused, nothing recorded',
  async (t) => {
    const d = await fresh();
    const r = await deliver(d.returnPath, rfc3464Delayed(parties(d)));
    t.equal(r.data?.code, 550, `refused after DATA (${r.data?.text})`);
    t.match(r.data?.text, /delayed/);
    t.same(await entryFor(d), [], 'no entry');
    t.equal((await ib.row(d.id)).bounced_at, null, 'the delivery is not marked');
  },
);

t.test(
  'a report whose words hold control characters (a NUL) is recorded with them blanked',
  async (t) => {
    const d = await fresh();
    const r = await deliver(
      d.returnPath,
      postfixUnknownUser(parties(d)).replace(
        'X-Postfix; unknown user: "nosuchuser"',
        'X-Postfix; unknown\0user\x01"nosuchuser"',
      ),
    );
    t.equal(r.data?.code, 250, `250, not a 451 from PostgreSQL refusing the NUL (${r.data?.text})`);
    t.match(await entryFor(d), [
      { reason: 'hard_bounce', detail: /X-Postfix; unknown user "nosuchuser"/ },
    ]);
  },
);

t.test('the change feed shows the bounce on the delivery (the feed was woken)', async (t) => {
  const d = await fresh();
  const r = await deliver(d.returnPath, postfixUnknownUser(parties(d)));
  t.equal(r.data?.code, 250);
  const row = await waitFor(
    async () => (await ib.svc.feed(ib.client)).find((x) => x.delivery_id === d.id && x.bounced_at),
    10_000,
    'the feed row with bounced_at',
  );
  t.equal(row.status, 'sent');
  t.match(row.bounced_at, /^\d{4}-\d\d-\d\dT/);
});

t.test(
  'complaint feedback reports become complaints, matched only through a signed return path',
  async (t) => {
    const viaReturnPath = await fresh();
    const a = await deliver(viaReturnPath.returnPath, rfc5965Abuse(parties(viaReturnPath)));
    t.equal(a.data?.code, 250, `RFC 5965 appendix B to the return path: 250 (${a.data?.text})`);

    const viaMailFrom = await fresh();
    const b = await deliver(
      FEEDBACK,
      yahooComplaint(parties(viaMailFrom, FEEDBACK)),
      'feedback@arf.mail.yahoo.com',
    );
    t.equal(b.rcpt[0]?.code, 250, 'the feedback-loop address is taken at RCPT TO');
    t.equal(
      b.data?.code,
      250,
      `Yahoo CFL to the feedback address, matched by Original-Mail-From: 250 (${b.data?.text})`,
    );

    const viaQuoted = await fresh();
    const c = await deliver(
      FEEDBACK,
      microsoftJmrpComplaint(parties(viaQuoted, FEEDBACK)),
      'staff@hotmail.com',
    );
    t.equal(
      c.data?.code,
      250,
      `Microsoft JMRP (recipient redacted), matched by the quoted Return-Path: 250 (${c.data?.text})`,
    );

    for (const [d, ua] of [
      [viaReturnPath, 'SomeGenerator/1.0'],
      [viaMailFrom, 'Yahoo!-Mail-Feedback/2.0'],
      [viaQuoted, 'Microsoft Junk Mail Reporting Program'],
    ] as const) {
      const entries = await entryFor(d);
      t.match(
        entries,
        [{ reason: 'complaint', source: 'complaint_mail', scope: '*', delivery_id: d.id }],
        `${ua}: a complaint entry for the delivery's address`,
      );
      t.match(
        entries[0]?.detail,
        new RegExp(`Feedback-Type: abuse; User-Agent: ${ua.replace(/[.!/]/g, '\\$&')}`),
      );
      const row = await ib.row(d.id);
      t.equal(row.status, 'sent', `${ua}: still sent`);
      t.ok(row.complained_at instanceof Date, `${ua}: complained_at is set`);
      t.equal(row.bounced_at, null);
    }
  },
);

t.test(
  "a mail to a delivery's unsubscribe mailto opts the address out of that event type only",
  async (t) => {
    const d = await fresh('newsletter.weekly');
    const r = await deliver(
      d.unsubscribeMailto,
      unsubscribeMail({ from: d.recipient, to: d.unsubscribeMailto }),
      d.recipient,
    );
    t.equal(r.data?.code, 250, `250 (${r.data?.text})`);
    t.match(await entryFor(d), [
      { reason: 'opt_out', source: 'unsubscribe', scope: 'newsletter.weekly', delivery_id: d.id },
    ]);
    const row = await ib.row(d.id);
    t.same(
      [row.status, row.bounced_at, row.complained_at],
      ['sent', null, null],
      'an unsubscribe is not a bounce or a complaint',
    );
    const again = await deliver(
      d.unsubscribeMailto,
      unsubscribeMail({ from: d.recipient, to: d.unsubscribeMailto }),
      d.recipient,
    );
    t.equal(again.data?.code, 250, 'a second unsubscribe mail is taken too');
    t.equal((await entryFor(d)).length, 1, 'and changes nothing more');
  },
);

t.test(
  'a bounce after a complaint keeps both marks; a repeated bounce keeps the first time',
  async (t) => {
    const d = await fresh();
    t.equal((await deliver(d.returnPath, rfc5965Abuse(parties(d)))).data?.code, 250);
    t.equal((await deliver(d.returnPath, postfixUnknownUser(parties(d)))).data?.code, 250);
    const first = await ib.row(d.id);
    t.ok(first.complained_at && first.bounced_at, 'complained_at and bounced_at');
    t.equal((await deliver(d.returnPath, gmailNoSuchUser(parties(d)))).data?.code, 250);
    const second = await ib.row(d.id);
    t.equal(
      second.bounced_at?.getTime(),
      first.bounced_at?.getTime(),
      'bounced_at is the first bounce',
    );
    t.match(
      await entryFor(d),
      [{ reason: 'hard_bounce', source: 'bounce_mail' }],
      'the entry holds the latest report',
    );
  },
);

t.test('the listener is part of /readyz and ens_consumer_up', async (t) => {
  const ready = await fetch(`${ib.svc.baseUrl}/readyz`);
  t.equal(ready.status, 200, 'ready');
  const metrics = await (await fetch(`${ib.svc.baseUrl}/metrics`)).text();
  t.match(
    metrics,
    /^ens_consumer_up\{stream="smtp",consumer="inbound"\} 1$/m,
    'the SMTP listener reports itself up',
  );
  t.match(
    metrics,
    /^ens_inbound_messages_total\{result="hard_bounce"\} [1-9]\d*$/m,
    'messages are counted by result',
  );
  t.match(
    metrics,
    /^ens_suppression_reports_total\{source="bounce_mail",kind="hard_bounce"\} [1-9]\d*$/m,
    'and as suppression reports',
  );
});
