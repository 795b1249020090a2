import t from 'tap';
import { peerKey } from '../src/peer-limits.ts';
import { bounceOf, readDeliveryStatus } from '../src/report/delivery-status.ts';
import { readFeedbackReport, returnPathsOf } from '../src/report/feedback-report.ts';
import { addressOf, readFieldBlocks, withoutComments } from '../src/report/field-blocks.ts';

/* The report readers on their own: the corners of RFC 3464 / RFC 5965 field syntax real MTAs use. */

t.test('field blocks: CRLF or LF, folding, blank lines of spaces, stray lines', async (t) => {
  const blocks = readFieldBlocks(
    'Reporting-MTA: dns; a.example\r\n\r\n   \r\nFinal-Recipient: rfc822; ' +
      'x@y.example\r\nDiagnostic-Code: smtp; 550 no\r\n  such user\r\nnot a field ' +
      'line\r\n\tfolded under it\r\nACTION:failed\r\n\r\n\r\n',
  );
  t.equal(
    blocks?.length,
    2,
    'a line of spaces separates blocks; several blank lines are one separator',
  );
  t.same(
    blocks?.[1]?.get('diagnostic-code'),
    ['smtp; 550 no such user'],
    'folded lines are joined',
  );
  t.same(
    blocks?.[1]?.get('action'),
    ['failed'],
    'names are case-insensitive, the space after the colon optional',
  );
  t.equal(blocks?.[1]?.size, 3, 'a stray line and what is folded under it are skipped');
  t.same(
    readFieldBlocks('Diagnostic-Code: smtp; 550\0no\x07such\x1buser')?.[0]?.get('diagnostic-code'),
    ['smtp; 550 no such user'],
    'control characters (NUL, which PostgreSQL refuses in text) become spaces (found by the ' +
      'fuzz test)',
  );
  t.same(readFieldBlocks(''), [], 'nothing is no blocks');
  t.equal(
    readFieldBlocks(Array.from({ length: 2000 }, (_, i) => `F${i}: x\n\n`).join('')),
    null,
    'too many blocks: unreadable',
  );
  t.equal(
    readFieldBlocks(Array.from({ length: 200 }, (_, i) => `F${i}: x\n`).join('')),
    null,
    'too many fields in a block: unreadable',
  );
  t.equal(
    readFieldBlocks(`A: ${'x'.repeat(10_000)}\n${' y\n'.repeat(5_000)}`)?.[0]?.get('a')?.[0]
      ?.length,
    2_000,
    'values are bounded',
  );
});

t.test('comments and typed addresses', async (t) => {
  t.equal(withoutComments('5.0.0 (permanent failure)'), '5.0.0');
  t.equal(withoutComments('4.0.0 (host (nested) lookup) failure'), '4.0.0 failure');
  t.equal(withoutComments('"a (not a comment)" b'), '"a (not a comment)" b');
  t.equal(addressOf('rfc822;louisl@larry.slip.umd.edu'), 'louisl@larry.slip.umd.edu');
  t.equal(addressOf('rfc822; <Bob@Example.org> (the user)'), 'Bob@Example.org');
  t.equal(addressOf('<bounce@x.example>'), 'bounce@x.example');
  t.equal(addressOf('x400; /PN=Joe/O=Acme/'), null, 'not an internet address');
  t.equal(addressOf('<>'), null, 'the null sender');
});

t.test('delivery status: the worst recipient block decides', async (t) => {
  const dsn = (...blocks: string[]) =>
    readDeliveryStatus(['Reporting-MTA: dns; mx.example', ...blocks].join('\n\n'));
  const verdict = (...blocks: string[]) => {
    const s = dsn(...blocks);
    return s ? (bounceOf(s)?.kind ?? 'none') : 'unreadable';
  };
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: failed\nStatus: 5.1.1'),
    'hard_bounce',
  );
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: failed\nStatus: 4.4.7'),
    'soft_bounce',
    'failed after giving up on 4.x.x: soft',
  );
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: delayed\nStatus: 4.2.2'),
    'none',
    'a delay warning: the message may still arrive',
  );
  t.equal(
    verdict(
      'Final-Recipient: rfc822; a@b.example\nAction: delayed\nStatus: 4.0.0',
      'Final-Recipient: rfc822; c@b.example\nAction: failed\nStatus: 5.2.1',
    ),
    'hard_bounce',
  );
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: delivered\nStatus: 2.0.0'),
    'none',
    'a success notice',
  );
  t.equal(
    verdict(
      'Final-Recipient: rfc822; a@b.example\nAction: FAILED (really)\nStatus: 5.1.1 (user unknown)',
    ),
    'hard_bounce',
    'case and comments',
  );
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: failed\nStatus: 5.1'),
    'unreadable',
  );
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: exploded\nStatus: 5.1.1'),
    'unreadable',
  );
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: failed\nStatus: 9.1.1'),
    'unreadable',
  );
  t.equal(
    verdict('Final-Recipient: rfc822; a@b.example\nAction: failed\nStatus: 2.0.0'),
    'none',
    'failed with a success code: nothing',
  );
  const noHead = readDeliveryStatus(
    'Final-Recipient: rfc822; a@b.example\nAction: failed\nStatus: 5.1.1',
  );
  t.equal(
    noHead?.recipients.length,
    1,
    'a report without its per-message block still has its recipient',
  );
  t.match(
    bounceOf(
      dsn(
        'Final-Recipient: rfc822; a@b.example\nAction: failed\nStatus: 5.1.1\nDiagnostic-Code: ' +
          'smtp; 550 5.1.1 no such user',
      )!,
    )?.detail,
    'failed 5.1.1 for a@b.example: smtp; 550 5.1.1 no such user (Reporting-MTA dns; mx.example)',
  );
});

t.test('feedback reports and the return paths they quote', async (t) => {
  const r = readFeedbackReport(
    'Feedback-Type: Abuse\nUser-Agent: X/1\nVersion: 1\nOriginal-Mail-From: ' +
      '<bxyz@b.example>\n\nSource-IP: 192.0.2.1',
  );
  t.match(
    r,
    {
      feedbackType: 'abuse',
      userAgent: 'X/1',
      originalMailFrom: 'bxyz@b.example',
      sourceIp: '192.0.2.1',
    },
    'fields after a stray blank line are kept',
  );
  t.equal(readFeedbackReport('User-Agent: X/1\nVersion: 1'), null, 'no Feedback-Type');
  t.equal(readFeedbackReport('Feedback-Type: ab use'), null, 'not a token');
  t.same(
    returnPathsOf(
      'Return-Path: <b1@x.example>\nReceived: from a\nReturn-Path: <>\nSubject: ' +
        's\n\nReturn-Path: <b2@x.example>\n',
    ),
    ['b1@x.example'],
    'only the header block, only real addresses',
  );
  t.same(
    returnPathsOf('From MAILER-DAEMON Thu Nov 26 19:37:45 2026\nReturn-Path: <b3@x.example>\n'),
    ['b3@x.example'],
    'an mbox From_ line is skipped',
  );
});

t.test('peers: IPv4 as is, IPv6 by its /64', async (t) => {
  t.equal(peerKey('192.0.2.7'), '192.0.2.7');
  t.equal(peerKey('::ffff:192.0.2.7'), '192.0.2.7', 'IPv4-mapped');
  t.equal(peerKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
  t.equal(peerKey('2001:db8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64', 'one /64, one peer');
  t.equal(peerKey('2001:0db8:0001:0003::1'), '2001:db8:1:3::/64', 'another /64');
  t.equal(peerKey('::1'), '0:0:0:0::/64');
  t.equal(peerKey('fe80::1%eth0'), 'fe80:0:0:0::/64', 'zone ids dropped');
});
