import fc from 'fast-check';
import t from 'tap';
import { SmtpTalk, sendOnce } from '../../../test/harness/smtp-talk.ts';
import {
  gmailNoSuchUser,
  microsoftJmrpComplaint,
  microsoftRecipientNotFound,
  postfixUnknownUser,
  rfc3464Delayed,
  rfc3464MultiRecipient,
  rfc3464Simple,
  rfc5965Abuse,
  yahooComplaint,
  type Parties,
} from './fixtures.ts';
import { FEEDBACK, startInboundService } from './inbound-service.ts';

/*
 * Random and mutated DSN and ARF messages over real SMTP conversations with the inbound role of a
 * running ENS, one connection carrying many transactions: every message gets a reply (250, or a
 * refusal with its 5xx), never a 451 (which would mean handling threw) or a dropped connection; a
 * refused message changes nothing; and afterwards the listener still takes a good report.
 * FUZZ_RUNS and FUZZ_SEED change the count and the seed.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

const ib = await startInboundService(t, {
  ENS_INBOUND_PEER_RATE_LIMIT: '100000',
  ENS_INBOUND_MAX_MESSAGE_BYTES: String(256 * 1024),
});
const target = await ib.sentDelivery('fuzzed@example.org');
const p: Parties = { returnPath: target.returnPath, recipient: target.recipient };
const seeds = [
  rfc3464Simple,
  rfc3464MultiRecipient,
  rfc3464Delayed,
  postfixUnknownUser,
  gmailNoSuchUser,
  microsoftRecipientNotFound,
  rfc5965Abuse,
  yahooComplaint,
  microsoftJmrpComplaint,
].map((f) => f(p));

/** One edit of a message: the kinds of damage a broken or hostile MTA produces. */
const mutation = fc.oneof(
  fc.record({
    op: fc.constant('delete' as const),
    at: fc.nat(),
    len: fc.integer({ min: 1, max: 400 }),
  }),
  fc.record({
    op: fc.constant('insert' as const),
    at: fc.nat(),
    text: fc.string({ unit: 'binary', maxLength: 200 }),
  }),
  fc.record({
    op: fc.constant('insert' as const),
    at: fc.nat(),
    text: fc.constantFrom(
      '\n',
      '\r',
      '\0',
      '\n\n',
      ':',
      ';',
      '(',
      ')',
      '"',
      '--',
      '\n--',
      '=?utf-8?B?',
      '\n ',
      'Status: ',
      'Action: ',
      'Content-Type: multipart/report; boundary=x\n',
    ),
  }),
  fc.record({
    op: fc.constant('duplicate-line' as const),
    at: fc.nat(),
    times: fc.integer({ min: 1, max: 300 }),
  }),
  fc.record({ op: fc.constant('swap-lines' as const), a: fc.nat(), b: fc.nat() }),
  fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('case' as const), upper: fc.boolean() }),
  fc.record({
    op: fc.constant('long-fold' as const),
    at: fc.nat(),
    times: fc.integer({ min: 1, max: 2_000 }),
  }),
);
type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;

function apply(text: string, m: Mutation): string {
  const lines = text.split('\n');
  switch (m.op) {
    case 'delete': {
      const at = m.at % (text.length + 1);
      return text.slice(0, at) + text.slice(at + m.len);
    }
    case 'insert': {
      const at = m.at % (text.length + 1);
      return text.slice(0, at) + m.text + text.slice(at);
    }
    case 'duplicate-line': {
      const i = m.at % lines.length;
      lines.splice(i, 0, ...Array<string>(m.times).fill(lines[i]!));
      return lines.join('\n');
    }
    case 'swap-lines': {
      const a = m.a % lines.length;
      const b = m.b % lines.length;
      [lines[a], lines[b]] = [lines[b]!, lines[a]!];
      return lines.join('\n');
    }
    case 'truncate':
      return text.slice(0, m.at % (text.length + 1));
    case 'case':
      return m.upper ? text.toUpperCase() : text.toLowerCase();
    case 'long-fold': {
      const i = m.at % lines.length;
      lines.splice(i + 1, 0, ...Array<string>(m.times).fill(' folded'));
      return lines.join('\n');
    }
  }
}

const mutated = fc
  .tuple(fc.constantFrom(...seeds.keys()), fc.array(mutation, { minLength: 1, maxLength: 6 }))
  .map(([i, ms]) => ms.reduce(apply, seeds[i]!));
const random = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 3_000 }),
  fc
    .tuple(
      fc.constantFrom('delivery-status', 'feedback-report', 'global-delivery-status', ''),
      fc.string({ maxLength: 20 }),
      fc.array(
        fc.tuple(
          fc.constantFrom(
            'message/delivery-status',
            'message/feedback-report',
            'message/rfc822',
            'text/rfc822-headers',
            'text/plain',
            'multipart/mixed',
          ),
          fc.string({ unit: 'binary', maxLength: 500 }),
        ),
        { maxLength: 4 },
      ),
    )
    .map(
      ([type, boundary, parts]) =>
        `Content-Type: multipart/report; report-type=${type}; boundary="${boundary}"\n\n${parts.map(([ct, body]) => `--${boundary}\nContent-Type: ${ct}\n\n${body}\n`).join('')}--${boundary}--\n`,
    ),
);
const message = fc.record({
  to: fc.constantFrom(target.returnPath, FEEDBACK),
  body: fc.oneof({ weight: 3, arbitrary: mutated }, { weight: 1, arbitrary: random }),
});

async function snapshot(): Promise<string> {
  return JSON.stringify([await ib.row(target.id), await ib.entries()]);
}

t.test(
  `${RUNS} random and mutated reports: always an answer, a refusal changes nothing, the listener keeps serving`,
  async (t) => {
    let talk = await SmtpTalk.open(ib.port);
    await talk.command('EHLO fuzz.client.invalid');
    const answers = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(message, async ({ to, body }) => {
        const before = await snapshot();
        const r = await talk.send({ from: '', to: [to], message: body });
        const code = r.data?.code ?? r.rcpt[0]?.code ?? r.mail.code;
        answers.set(code, (answers.get(code) ?? 0) + 1);
        if (![250, 550, 552, 554].includes(code))
          throw new Error(`answered ${code} ${r.data?.text ?? ''} to:\n${body.slice(0, 2_000)}`);
        if (code !== 250 && (await snapshot()) !== before)
          throw new Error(
            `refused with ${code} but something was recorded:\n${body.slice(0, 2_000)}`,
          );
        if (talk.closed) {
          talk = await SmtpTalk.open(ib.port);
          await talk.command('EHLO fuzz.client.invalid');
        }
      }),
      { numRuns: RUNS, seed: Number(process.env.FUZZ_SEED ?? 20261126) },
    );
    await talk.quit();
    t.pass(`${RUNS} messages answered: ${[...answers].map(([c, k]) => `${c}×${k}`).join(', ')}`);
    t.ok(
      answers.get(250) && [550, 554].some((c) => answers.get(c)),
      'the fuzz reached both outcomes',
    );

    const after = await ib.sentDelivery('after-fuzz@example.org');
    const ok = await sendOnce(ib.port, {
      from: '',
      to: [after.returnPath],
      message: postfixUnknownUser({ returnPath: after.returnPath, recipient: after.recipient }),
    });
    t.equal(ok.data?.code, 250, 'a good report afterwards is taken');
    t.ok((await ib.row(after.id)).bounced_at, 'and recorded');
  },
);
