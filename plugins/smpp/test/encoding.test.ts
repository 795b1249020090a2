import t from 'tap';
import smpp from 'smpp';
import type { OutboundMessage } from '@ens/plugin-sdk';
import { classifyStatus, describeStatus } from '../src/command-status.ts';
import {
  parseReceipt,
  parseReceiptDate,
  parseReceiptText,
  receiptUpdate,
} from '../src/delivery-receipt.ts';
import { concatUdh, encodeGsm7, encodeText, encodeUcs2 } from '../src/sms-encoding.ts';
import { destinationAddress, sourceAddress, submitParams } from '../src/submit.ts';

const GSM_BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ' +
  'ÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';

t.test(
  'GSM 03.38: every basic character is its own septet, as node-smpp decodes it back',
  async (t) => {
    const bytes = encodeGsm7(GSM_BASIC)!;
    t.equal(bytes.length, 127, 'one octet per character (127 characters, the escape excluded)');
    t.same([...bytes.subarray(0, 4)], [0x00, 0x01, 0x02, 0x03], '@ £ $ ¥ are 0x00-0x03');
    t.equal(bytes[GSM_BASIC.indexOf('A')], 0x41);
    t.equal(bytes[GSM_BASIC.indexOf('¡')], 0x40);
    t.equal(bytes[GSM_BASIC.indexOf('_')], 0x11);
    t.equal(
      smpp.encodings.ASCII!.decode(bytes),
      GSM_BASIC,
      "node-smpp's independent GSM table reads the same text",
    );
  },
);

t.test('GSM 03.38 extension characters are escaped with 0x1B', async (t) => {
  t.same(
    [...encodeGsm7('{}[]~\\|^€\f')!],
    [
      0x1b, 0x28, 0x1b, 0x29, 0x1b, 0x3c, 0x1b, 0x3e, 0x1b, 0x3d, 0x1b, 0x2f, 0x1b, 0x40, 0x1b,
      0x14, 0x1b, 0x65, 0x1b, 0x0a,
    ],
  );
  t.equal(encodeGsm7('smart ’quote’'), null, 'a character outside the alphabet');
  t.equal(encodeGsm7('a\u001bb'), null, 'a bare escape character is not sendable');
});

t.test('UCS-2 is big-endian, with surrogate pairs beyond the BMP', async (t) => {
  t.same([...encodeUcs2('Пр👋')], [0x04, 0x1f, 0x04, 0x40, 0xd8, 0x3d, 0xdc, 0x4b]);
});

t.test('encodeText picks the coding and splits on character boundaries', async (t) => {
  t.same(encodeText('hello'), { dataCoding: 0, segments: [Buffer.from('hello')] });
  const s160 = encodeText('a'.repeat(160));
  t.equal(s160.segments.length, 1, '160 GSM characters fit one message');
  const s161 = encodeText('a'.repeat(161));
  t.same(
    s161.segments.map((s) => s.length),
    [153, 8],
    '161 go as 153 + 8',
  );
  const esc = encodeText(`${'a'.repeat(152)}€${'b'.repeat(10)}`);
  t.same(
    esc.segments.map((s) => s.length),
    [152, 12],
    'the escape pair is not split across segments',
  );
  t.same([...esc.segments[1]!.subarray(0, 2)], [0x1b, 0x65]);
  t.equal(
    encodeText('€'.repeat(80)).segments.length,
    1,
    '80 euro signs are 160 septets: one message',
  );
  t.equal(encodeText('€'.repeat(81)).segments.length, 2);

  const u70 = encodeText('Ж'.repeat(70));
  t.equal(u70.dataCoding, 8);
  t.same(
    u70.segments.map((s) => s.length),
    [140],
    '70 UCS-2 characters fit one message',
  );
  t.same(
    encodeText('Ж'.repeat(71)).segments.map((s) => s.length),
    [134, 8],
    '71 go as 67 + 4',
  );
  const sur = encodeText(`${'Ж'.repeat(66)}👋${'Ж'.repeat(5)}`);
  t.same(
    sur.segments.map((s) => s.length),
    [132, 14],
    'a surrogate pair is not split across segments',
  );
  t.same([...sur.segments[1]!.subarray(0, 4)], [0xd8, 0x3d, 0xdc, 0x4b]);
});

t.test('concatenation UDH with an 8-bit reference', async (t) => {
  t.same([...concatUdh(0x1a2, 3, 2)], [0x05, 0x00, 0x03, 0xa2, 0x03, 0x02]);
});

t.test('addresses: destination digits and sender TON/NPI', async (t) => {
  t.same(destinationAddress('+4915112345678'), { ton: 1, npi: 1, addr: '4915112345678' });
  t.throws(() => destinationAddress('+49 151'), {
    ensErrorKind: 'permanent',
    message: 'smpp: recipient +49 151 is not an E.164 phone number',
  });
  t.same(sourceAddress('ENS Alerts'), { ton: 5, npi: 0, addr: 'ENS Alerts' });
  t.same(sourceAddress('+15550001111'), { ton: 1, npi: 1, addr: '15550001111' });
  t.same(sourceAddress('12345'), { ton: 1, npi: 1, addr: '12345' });
  t.same(sourceAddress(undefined), { ton: 0, npi: 0, addr: '' });
});

t.test('submitParams: tenant sender_id overrides the default; no body is permanent', async (t) => {
  const m: OutboundMessage = {
    deliveryId: 'd1',
    attempt: 1,
    channel: 'sms',
    recipient: '+15551230000',
    tenant: 't',
    tenantSettings: { sender_id: 'Tenant' },
    eventType: 'e',
    reference: null,
    content: { body: 'hi' },
  };
  const [p] = submitParams(m, { defaultSender: 'ENS', registeredDelivery: true, concatRef: 7 });
  t.match(p, {
    source_addr: 'Tenant',
    source_addr_ton: 5,
    destination_addr: '15551230000',
    registered_delivery: 1,
    data_coding: 0,
    esm_class: 0,
  });
  const [q] = submitParams(
    { ...m, tenantSettings: {} },
    { defaultSender: 'ENS', registeredDelivery: false, concatRef: 7 },
  );
  t.match(q, { source_addr: 'ENS', registered_delivery: 0 });
  t.throws(
    () =>
      submitParams(
        { ...m, content: {} },
        { defaultSender: undefined, registeredDelivery: true, concatRef: 1 },
      ),
    { ensErrorKind: 'permanent', message: /no body/ },
  );
  t.throws(
    () =>
      submitParams(
        { ...m, content: { body: 'x'.repeat(153 * 255 + 1) } },
        { defaultSender: undefined, registeredDelivery: true, concatRef: 1 },
      ),
    {
      ensErrorKind: 'permanent',
      message: /256 segments/,
    },
  );
});

t.test('command_status classes and descriptions', async (t) => {
  t.equal(classifyStatus(0x00), 'ok');
  t.equal(classifyStatus(0x58), 'rate_limited');
  for (const s of [0x14, 0x08, 0x45, 0x0d, 0x0e, 0xff, 0x400, 0x1234])
    t.equal(classifyStatus(s), 'transient', describeStatus(s));
  for (const s of [0x0b, 0x0a, 0x01, 0x104, 0x48, 0x51, 0xc4])
    t.equal(classifyStatus(s), 'permanent', describeStatus(s));
  t.equal(describeStatus(0x0b), 'ESME_RINVDSTADR (0x0B): Invalid Destination Address');
  t.equal(describeStatus(0x104), 'ESME_RINVDCS (0x104): Invalid Data Coding Scheme');
  t.equal(describeStatus(0x401), 'vendor-specific error (0x401)');
});

t.test('receipt text (SMPP 3.4 appendix B)', async (t) => {
  const text =
    'id:1A2b3C sub:001 dlvrd:000 submit date:2501020304 done date:2501020405 stat:UNDELIV ' +
    'err:001 text:Hello';
  t.same(parseReceiptText(text), {
    id: '1A2b3C',
    stat: 'UNDELIV',
    err: '001',
    doneAt: new Date('2025-01-02T04:05:00Z'),
  });
  t.same(parseReceiptText('ID:9 STAT:delivered Done Date:250102040506'), {
    id: '9',
    stat: 'DELIVRD',
    err: undefined,
    doneAt: new Date('2025-01-02T04:05:06Z'),
  });
  t.equal(parseReceiptDate('2502300000'), undefined, 'February 30th is not a date');
  t.equal(parseReceiptDate('25010203'), undefined);
});

t.test('parseReceipt prefers the TLVs, and receiptUpdate maps the states', async (t) => {
  const now = new Date('2025-06-01T00:00:00Z');
  const tlv = parseReceipt({
    receipted_message_id: 'abc',
    message_state: 5,
    network_error_code: Buffer.from([3, 0, 21]),
    short_message: { message: '' },
  });
  t.same(tlv, { messageId: 'abc', stat: 'UNDELIV', err: '021' });
  t.same(receiptUpdate(tlv!, now), {
    providerMessageId: 'abc',
    status: 'failed',
    at: now,
    error: 'smpp: UNDELIV (err 021)',
  });
  const both = parseReceipt({
    receipted_message_id: 'abc',
    message_state: 2,
    short_message: { message: 'id:ABC stat:UNDELIV done date:2501010000' },
  });
  t.same(
    both,
    { messageId: 'abc', stat: 'DELIVRD', doneAt: new Date('2025-01-01T00:00:00Z') },
    'TLV id and state win over the text',
  );
  t.same(receiptUpdate(both!, now), {
    providerMessageId: 'abc',
    status: 'delivered',
    at: new Date('2025-01-01T00:00:00Z'),
  });
  const raw = parseReceipt({
    short_message: Buffer.from('id:77 sub:001 dlvrd:000 stat:REJECTD err:0x0B'),
  });
  t.same(receiptUpdate(raw!, now), {
    providerMessageId: '77',
    status: 'failed',
    at: now,
    error: 'smpp: REJECTD (err 0x0B)',
  });
  for (const stat of ['ENROUTE', 'ACCEPTD', 'SCHEDULED'])
    t.equal(receiptUpdate({ messageId: '1', stat }, now), null, `${stat} reports nothing`);
  for (const stat of ['EXPIRED', 'DELETED', 'UNKNOWN', 'REJECTD'])
    t.equal(receiptUpdate({ messageId: '1', stat }, now)?.status, 'failed', `${stat} is failed`);
  t.equal(
    parseReceipt({ short_message: { message: 'hello' } }),
    null,
    'no id: not a receipt we can match',
  );
  t.same(
    parseReceipt({ message_payload: { message: 'id:5 stat:DELIVRD' } }),
    { messageId: '5', stat: 'DELIVRD' },
    'text in message_payload',
  );
});
