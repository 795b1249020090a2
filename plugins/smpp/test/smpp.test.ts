import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import {
  classifyError,
  type OutboundMessage,
  type Provider,
  type RecipientReport,
  type StatusUpdate,
} from '@ens/plugin-sdk';
import { recordingContext, type RecordingContext } from '@ens/plugin-sdk/conformance';
import plugin from '../src/index.ts';
import type { SmppConfigInput } from '../src/config.ts';
import { encodeGsm7 } from '../src/sms-encoding.ts';
import { ESME, FakeSmsc, errorRecipient, type FakeSmscOptions } from '../src/testing/fake-smsc.ts';

/** The part of a tap test the rig needs (tap's subtest type is not the root's). */
type Test = { teardown(fn: () => unknown): void };

const sms = (
  recipient: string,
  body: string,
  tenantSettings: OutboundMessage['tenantSettings'] = {},
): OutboundMessage => ({
  deliveryId: '0190a0b0-0000-7000-8000-00000000aaaa',
  attempt: 1,
  channel: 'sms',
  recipient,
  tenant: 'acme',
  tenantSettings,
  eventType: 'order.shipped',
  reference: null,
  content: { kind: 'rendered', body },
});

interface Rig {
  smsc: FakeSmsc;
  ctx: RecordingContext;
  provider: Provider;
  port: number;
  config: SmppConfigInput;
}

/**
 * A fake SMSC and a provider bound to it; both end with the test (provider first, so it can
 * unbind).
 */
async function rig(
  t: Test,
  cfg: Partial<SmppConfigInput> = {},
  fake: FakeSmscOptions = {},
  ctx: RecordingContext = recordingContext(),
): Promise<Rig> {
  const smsc = new FakeSmsc({ systemId: 'ens', password: 'secret', ...fake });
  const { host, port } = await smsc.start();
  const config: SmppConfigInput = {
    host,
    port,
    systemId: 'ens',
    password: 'secret',
    reconnectMinMs: 20,
    reconnectMaxMs: 100,
    connectTimeoutMs: 1_000,
    submitTimeoutMs: 1_000,
    ...cfg,
  };
  const provider = await plugin.create(config, ctx);
  t.teardown(async () => {
    await provider.close?.();
    await smsc.stop();
  });
  return { smsc, ctx, provider, port, config };
}

async function sendError(p: Provider, m: OutboundMessage) {
  try {
    const r = await p.send(m);
    return {
      kind: 'resolved',
      message: JSON.stringify(r),
      retryAfterMs: undefined as number | undefined,
    };
  } catch (e) {
    const c = classifyError(e);
    const classified = e !== null && typeof e === 'object' && 'ensErrorKind' in e;
    return {
      kind: classified ? (c.kind as string) : `unclassified ${String(e)}`,
      message: c.message,
      retryAfterMs: c.retryAfterMs,
    };
  }
}

const reportFor = (ctx: RecordingContext, id: string, ms = 2_000) =>
  ctx.waitForReport((u) => u.providerMessageId === id, ms);

t.test('binds as transceiver with the account, SMPP 3.4', async (t) => {
  const { smsc } = await rig(t, { systemType: 'VMA' });
  await smsc.waitFor(() => smsc.boundCount === 1, 2_000, 'bind');
  t.match(smsc.binds, [
    {
      command: 'bind_transceiver',
      systemId: 'ens',
      password: 'secret',
      systemType: 'VMA',
      interfaceVersion: 0x34,
      status: 0,
    },
  ]);
});

t.test(
  'send: submit_sm fields, the message id, and a text receipt reported delivered at its done date',
  async (t) => {
    const { smsc, ctx, provider } = await rig(t, { sourceAddr: 'ENS' });
    smsc.receipts.send = false;
    const { providerMessageId } = await provider.send(sms('+15551234567', 'Your order shipped'));
    t.equal(smsc.submits.length, 1);
    const s = smsc.submits[0]!;
    t.equal(providerMessageId, s.messageId, "the providerMessageId is the SMSC's message_id");
    t.match(s, {
      serviceType: '',
      sourceTon: 5,
      sourceNpi: 0,
      sourceAddr: 'ENS',
      destTon: 1,
      destNpi: 1,
      destinationAddr: '15551234567',
      esmClass: 0,
      registeredDelivery: 1,
      dataCoding: 0,
      text: 'Your order shipped',
    });
    t.same(
      s.shortMessage,
      Buffer.from('Your order shipped'),
      'GSM-7 unpacked: ASCII letters are the same octets',
    );
    const raw = smsc.received.find((r) => r.command === 'submit_sm')!.raw;
    t.equal(raw.readUInt32BE(0), raw.length, 'command_length');
    t.equal(raw.readUInt32BE(4), 0x00000004, 'command_id submit_sm');

    const done = new Date('2025-03-04T05:06:00Z');
    t.equal(
      await smsc.sendReceipt(
        providerMessageId,
        { stat: 'DELIVRD', format: 'text', doneDate: done },
        s,
      ),
      0,
      'deliver_sm_resp ESME_ROK',
    );
    const u = await reportFor(ctx, providerMessageId);
    t.same(u, { providerMessageId, status: 'delivered', at: done });
  },
);

t.test('the fake sends a receipt by itself after a submit (TLV and text)', async (t) => {
  const { smsc, ctx, provider } = await rig(t);
  const { providerMessageId } = await provider.send(sms('+15551234567', 'hello'));
  const u = await reportFor(ctx, providerMessageId);
  t.equal(u?.status, 'delivered');
  await smsc.waitFor(() => smsc.deliverResponses.length === 1);
  t.same(smsc.deliverResponses, [{ messageId: providerMessageId, status: 0 }]);
});

t.test(
  'failure receipts: TLV-only, text-only, both; intermediate states report nothing',
  async (t) => {
    const { smsc, ctx, provider } = await rig(t);
    smsc.receipts.send = false;
    const id = async () => (await provider.send(sms('+15551234567', 'hi'))).providerMessageId;
    const sub = () => smsc.submits.at(-1)!;

    const a = await id();
    const before = Date.now();
    await smsc.sendReceipt(a, { stat: 'UNDELIV', err: '001', format: 'tlv' }, sub());
    const ua = await reportFor(ctx, a);
    t.match(
      ua,
      { status: 'failed', error: 'smpp: UNDELIV (err 001)' },
      'TLV receipted_message_id, message_state, network_error_code',
    );
    t.ok(
      ua!.at.getTime() >= before - 1 && ua!.at.getTime() <= Date.now(),
      'no done date in TLVs: at is now',
    );

    const b = await id();
    await smsc.sendReceipt(
      b,
      { stat: 'REJECTD', err: '011', format: 'text', doneDate: new Date('2025-01-01T10:00:00Z') },
      sub(),
    );
    t.same(await reportFor(ctx, b), {
      providerMessageId: b,
      status: 'failed',
      at: new Date('2025-01-01T10:00:00Z'),
      error: 'smpp: REJECTD (err 011)',
    });

    const c = await id();
    await smsc.sendReceipt(c, { stat: 'EXPIRED', format: 'both' }, sub());
    t.match(await reportFor(ctx, c), { status: 'failed', error: 'smpp: EXPIRED (err 000)' });

    const d = await id();
    t.equal(await smsc.sendReceipt(d, { stat: 'ENROUTE' }, sub()), 0, 'ENROUTE is answered');
    t.equal(await smsc.sendReceipt(d, { stat: 'ACCEPTD' }, sub()), 0, 'ACCEPTD is answered');
    t.notOk(
      ctx.reports.some((r) => r.providerMessageId === d),
      'and reports nothing',
    );

    t.equal(await smsc.sendReceipt('not-ours', { stat: 'DELIVRD' }), 0);
    t.ok(
      await reportFor(ctx, 'not-ours'),
      'an unknown id is reported as it is: matching is the core’s job, on the exact string',
    );
  },
);

t.test(
  'a mobile-originated deliver_sm that is no keyword is answered and reports nothing',
  async (t) => {
    const { smsc, ctx } = await rig(t);
    await smsc.waitFor(() => smsc.boundCount === 1);
    t.equal(
      await smsc.deliverSm({
        source_addr: '15550001111',
        destination_addr: '15005550006',
        esm_class: 0,
        data_coding: 0,
        short_message: 'see you at 5',
      }),
      0,
    );
    t.equal(ctx.reports.length, 0);
    t.equal(ctx.recipientReports.length, 0);
  },
);

const TEXTER = '+15557651234';
const only = (r: RecipientReport | undefined) =>
  r && {
    kind: r.kind,
    address: r.address,
    channel: r.channel,
    sender: r.sender,
    providerMessageId: r.providerMessageId,
  };

t.test(
  'an MO STOP through the fake SMSC reports an opt-out of the phone from the number it texted',
  async (t) => {
    const { smsc, ctx } = await rig(t, { sourceAddr: '+15005550006' });
    await smsc.waitFor(() => smsc.boundCount === 1);
    const before = Date.now();
    t.equal(
      await smsc.sendMo({ from: TEXTER, to: '+15005550006', text: 'STOP' }),
      ESME.ROK,
      'deliver_sm_resp ESME_ROK',
    );
    t.equal(ctx.recipientReports.length, 1, 'reported before the deliver_sm_resp');
    const r = ctx.recipientReports[0]!;
    t.same(only(r), {
      kind: 'opt_out',
      address: TEXTER,
      channel: 'sms',
      sender: { id: '+15005550006', isDefault: true },
      providerMessageId: undefined,
    });
    t.equal(r.detail, 'smpp MO to 15005550006: text "STOP"', 'the words are the evidence');
    t.ok(r.at.getTime() >= before - 1 && r.at.getTime() <= Date.now() + 1);
    const mo = smsc.received.find((p) => p.command === 'deliver_sm_resp');
    t.equal(mo?.commandStatus, ESME.ROK);
    t.equal(ctx.reports.length, 0, 'no status report');

    for (const text of [
      'stopall',
      'Stop.',
      ' UNSUBSCRIBE ',
      'cancel',
      'End',
      'quit',
      'revoke',
      'Opt-out',
    ]) {
      await smsc.sendMo({ from: TEXTER, to: '+15005550006', text });
      t.equal(ctx.recipientReports.at(-1)?.kind, 'opt_out', `"${text}" is an opt-out`);
    }
    for (const text of ['START', 'yes', 'Unstop']) {
      await smsc.sendMo({ from: TEXTER, to: '+15005550006', text });
      t.equal(ctx.recipientReports.at(-1)?.kind, 'opt_in', `"${text}" is an opt-in`);
    }
    const n = ctx.recipientReports.length;
    t.equal(n, 12);

    await smsc.sendMo({ from: TEXTER, to: '15005550009', text: 'STOP' });
    t.same(
      ctx.recipientReports.at(-1)?.sender,
      { id: '+15005550009', isDefault: false },
      'to another number: only the tenants sending from it',
    );
    await smsc.sendMo({ from: TEXTER, to: '12345', text: 'STOP' });
    t.same(
      ctx.recipientReports.at(-1)?.sender,
      { id: '+12345', isDefault: false },
      'to a short code',
    );
    await smsc.sendMo({ from: TEXTER, to: '+15005550006', text: 'Stopp', ucs2: true });
    t.equal(ctx.recipientReports.length, n + 2, 'a misspelt keyword is no keyword');
    await smsc.sendMo({ from: TEXTER, to: '+15005550006', text: 'STOP', ucs2: true });
    t.equal(
      ctx.recipientReports.at(-1)?.detail,
      'smpp MO to 15005550006: text "STOP"',
      'UCS-2 text is read',
    );
    t.equal(
      await smsc.deliverSm({
        source_addr_ton: 1,
        source_addr_npi: 1,
        source_addr: TEXTER.slice(1),
        destination_addr: '15005550006',
        esm_class: 0,
        data_coding: 0,
        short_message: Buffer.alloc(0),
        message_payload: 'STOP',
      }),
      ESME.ROK,
    );
    t.equal(ctx.recipientReports.length, n + 4, 'a keyword in message_payload is read');
  },
);

t.test(
  'what is not a plain MO keyword from a whole phone number reports nothing, and is answered',
  async (t) => {
    const { smsc, ctx } = await rig(t, { sourceAddr: '+15005550006' });
    await smsc.waitFor(() => smsc.boundCount === 1);
    const cases: [string, Parameters<FakeSmsc['sendMo']>[0]][] = [
      ['HELP', { from: TEXTER, to: '+15005550006', text: 'HELP' }],
      ['INFO', { from: TEXTER, to: '+15005550006', text: 'info' }],
      ['a sentence', { from: TEXTER, to: '+15005550006', text: 'please stop texting me' }],
      [
        'an intermediate delivery notification (esm_class 0x20)',
        { from: TEXTER, to: '+15005550006', text: 'STOP', esmClass: 0x20 },
      ],
      [
        'a national source number (TON 2)',
        { from: '07700900123', to: '+15005550006', text: 'STOP', sourceTon: 2 },
      ],
      [
        'an alphanumeric source (TON 5)',
        { from: 'BANK', to: '+15005550006', text: 'STOP', sourceTon: 5 },
      ],
    ];
    for (const [what, mo] of cases)
      t.equal(await smsc.sendMo(mo), ESME.ROK, `${what}: answered ESME_ROK`);
    t.equal(ctx.recipientReports.length, 0, 'none reported');
  },
);

t.test(
  'without sourceAddr, a STOP binds only the tenants sending from the number texted',
  async (t) => {
    const { smsc, ctx } = await rig(t);
    await smsc.waitFor(() => smsc.boundCount === 1);
    await smsc.sendMo({ from: TEXTER, to: '+15005550006', text: 'STOP' });
    t.same(ctx.recipientReports[0]?.sender, { id: '+15005550006', isDefault: false });
  },
);

t.test(
  'reportRecipient failing answers ESME_RX_T_APPN, so the SMSC delivers the STOP again',
  async (t) => {
    const base = recordingContext();
    let down = true;
    const ctx: RecordingContext = {
      ...base,
      reportRecipient: async (r: RecipientReport) => {
        if (down) throw new Error('database unavailable');
        return base.reportRecipient(r);
      },
    };
    const { smsc } = await rig(t, { sourceAddr: '+15005550006' }, {}, ctx);
    await smsc.waitFor(() => smsc.boundCount === 1);
    t.equal(
      await smsc.sendMo({ from: TEXTER, to: '+15005550006', text: 'STOP' }),
      0x64,
      'ESME_RX_T_APPN',
    );
    t.equal(base.recipientReports.length, 0);
    down = false;
    t.equal(
      await smsc.sendMo({ from: TEXTER, to: '+15005550006', text: 'STOP' }),
      ESME.ROK,
      'the redelivery is taken',
    );
    t.equal(base.recipientReports.length, 1);
  },
);

t.test(
  'reportStatus failing answers ESME_RX_T_APPN so that the SMSC retries the receipt',
  async (t) => {
    const base = recordingContext();
    const ctx: RecordingContext = {
      ...base,
      reportStatus: async (_u: StatusUpdate) => {
        throw new Error('database unavailable');
      },
    };
    const { smsc, provider } = await rig(t, {}, {}, ctx);
    smsc.receipts.send = false;
    const { providerMessageId } = await provider.send(sms('+15551234567', 'x'));
    t.equal(await smsc.sendReceipt(providerMessageId, {}, smsc.submits[0]), 0x64);
    t.ok(
      base.logs.some((l) => l.level === 'error' && /ESME_RX_T_APPN/.test(l.msg ?? '')),
      'logged',
    );
  },
);

t.test(
  'sender: tenant sender_id overrides sourceAddr; numeric senders are international',
  async (t) => {
    const { smsc, provider } = await rig(t, { sourceAddr: 'ENS' });
    await provider.send(sms('+4915112345678', 'a', { sender_id: '+4930123456' }));
    await provider.send(sms('+4915112345678', 'b', { sender_id: 'Acme' }));
    t.match(smsc.submits, [
      { sourceTon: 1, sourceNpi: 1, sourceAddr: '4930123456', destinationAddr: '4915112345678' },
      { sourceTon: 5, sourceNpi: 0, sourceAddr: 'Acme' },
    ]);
  },
);

t.test('data_coding: 0 with GSM 03.38 octets when the text fits, else 8 with UCS-2', async (t) => {
  const { smsc, provider } = await rig(t);
  await provider.send(sms('+15551234567', 'Pay €5 @ {shop} £ é'));
  await provider.send(sms('+15551234567', 'Привет 👋'));
  await provider.send(sms('+15551234567', 'It’s here')); // a typographic apostrophe is not GSM
  const [gsm, ucs, apos] = smsc.submits;
  t.equal(gsm!.dataCoding, 0);
  t.same(
    [...gsm!.shortMessage],
    [
      0x50, 0x61, 0x79, 0x20, 0x1b, 0x65, 0x35, 0x20, 0x00, 0x20, 0x1b, 0x28, 0x73, 0x68, 0x6f,
      0x70, 0x1b, 0x29, 0x20, 0x01, 0x20, 0x05,
    ],
    'exact GSM 03.38 octets (€ { } escaped, @ = 0x00, £ = 0x01, é = 0x05)',
  );
  t.equal(gsm!.text, 'Pay €5 @ {shop} £ é', "node-smpp's decoder reads the same text");
  t.equal(ucs!.dataCoding, 8);
  t.same(
    [...ucs!.shortMessage],
    [
      0x04, 0x1f, 0x04, 0x40, 0x04, 0x38, 0x04, 0x32, 0x04, 0x35, 0x04, 0x42, 0x00, 0x20, 0xd8,
      0x3d, 0xdc, 0x4b,
    ],
    'exact UCS-2 (UTF-16BE) octets',
  );
  t.equal(apos!.dataCoding, 8);
  t.equal(apos!.text, 'It’s here');
});

t.test(
  'a long text goes as concatenated segments with a UDH; the first message_id is the id',
  async (t) => {
    const { smsc, ctx, provider } = await rig(t);
    smsc.receipts.send = false;
    const text = Array.from({ length: 40 }, (_, i) => `line ${String(i).padStart(3, '0')}`).join(
      ' ',
    );
    t.equal(text.length, 359);
    const { providerMessageId } = await provider.send(sms('+15551234567', text));
    t.equal(smsc.submits.length, 3);
    const [a, b, c] = smsc.submits as [
      (typeof smsc.submits)[0],
      (typeof smsc.submits)[0],
      (typeof smsc.submits)[0],
    ];
    t.equal(providerMessageId, a.messageId);
    const ref = a.udh![3]!;
    t.same([...a.udh!], [0x05, 0x00, 0x03, ref, 3, 1]);
    t.same([...b.udh!], [0x05, 0x00, 0x03, ref, 3, 2]);
    t.same([...c.udh!], [0x05, 0x00, 0x03, ref, 3, 3]);
    for (const s of [a, b, c])
      t.match(s, {
        esmClass: 0x40,
        dataCoding: 0,
        registeredDelivery: 1,
        destinationAddr: '15551234567',
      });
    t.same([a.payload.length, b.payload.length, c.payload.length], [153, 153, 53]);
    t.same(
      Buffer.concat([a.payload, b.payload, c.payload]),
      encodeGsm7(text),
      'the segments are the text',
    );

    // The delivery follows the first segment; a later segment's failure fails it.
    await smsc.sendReceipt(c.messageId!, { stat: 'DELIVRD' }, c);
    await smsc.sendReceipt(b.messageId!, { stat: 'UNDELIV', err: '005' }, b);
    const u = await reportFor(ctx, providerMessageId);
    t.match(u, { status: 'failed', error: 'smpp: UNDELIV (err 005) on segment 2 of 3' });
    t.notOk(
      ctx.reports.some((r) => r.providerMessageId === c.messageId),
      'a later segment delivered reports nothing of its own',
    );

    const second = await provider.send(sms('+15551234567', 'Ж'.repeat(100)));
    const [x, y] = smsc.submits.slice(3);
    t.equal(second.providerMessageId, x!.messageId);
    t.not(x!.udh![3], ref, 'a new reference for the next message');
    t.match(
      [x, y],
      [
        { dataCoding: 8, esmClass: 0x40 },
        { dataCoding: 8, esmClass: 0x40 },
      ],
    );
    t.same(
      [x!.payload.length, y!.payload.length],
      [134, 66],
      'UCS-2 segments of 67 and 33 characters',
    );
  },
);

t.test('a segment refused after the first names the segment', async (t) => {
  const { smsc, provider } = await rig(t);
  smsc.submitStatus = (s) => (s.udh?.[5] === 2 ? ESME.RINVMSGLEN : null);
  const r = await sendError(provider, sms('+15551234567', 'x'.repeat(200)));
  t.equal(r.kind, 'permanent');
  t.equal(
    r.message,
    `smpp ESME_RINVMSGLEN (0x01): Message Length is invalid (segment 2 of 2, 1 already accepted as ${smsc.submits[0]!.messageId})`,
  );
});

t.test('each command_status class', async (t) => {
  const { provider } = await rig(t);
  const cases: [number, string, string][] = [
    [
      ESME.RTHROTTLED,
      'rate_limited',
      'smpp ESME_RTHROTTLED (0x58): Throttling error (ESME has exceeded allowed message limits)',
    ],
    [ESME.RMSGQFUL, 'transient', 'smpp ESME_RMSGQFUL (0x14): Message Queue Full'],
    [ESME.RSYSERR, 'transient', 'smpp ESME_RSYSERR (0x08): System Error'],
    [
      ESME.RSUBMITFAIL,
      'transient',
      'smpp ESME_RSUBMITFAIL (0x45): submit_sm or submit_multi failed',
    ],
    [0x0400, 'transient', 'smpp vendor-specific error (0x400)'],
    [ESME.RINVDSTADR, 'permanent', 'smpp ESME_RINVDSTADR (0x0B): Invalid Destination Address'],
    [ESME.RINVSRCADR, 'permanent', 'smpp ESME_RINVSRCADR (0x0A): Invalid Source Address'],
    [ESME.RINVMSGLEN, 'permanent', 'smpp ESME_RINVMSGLEN (0x01): Message Length is invalid'],
    [ESME.RINVDCS, 'permanent', 'smpp ESME_RINVDCS (0x104): Invalid Data Coding Scheme'],
  ];
  for (const [status, kind, message] of cases) {
    const r = await sendError(provider, sms(errorRecipient(status), 'x'));
    t.same({ kind: r.kind, message: r.message }, { kind, message }, message);
    if (kind === 'rate_limited') t.equal(r.retryAfterMs, undefined, 'SMPP gives no retry hint');
  }
  t.match(
    await sendError(provider, sms('+1555x1234', 'x')),
    { kind: 'permanent', message: 'smpp: recipient +1555x1234 is not an E.164 phone number' },
    'a recipient that is no E.164 number',
  );
  t.match(await sendError(provider, { ...sms('+15551234567', ''), content: {} }), {
    kind: 'permanent',
    message: 'smpp: the sms content has no body to send',
  });
});

t.test(
  'ESME_RINVDSTADR is a refusal about the recipient; the other permanent refusals are not',
  async (t) => {
    const { provider } = await rig(t);
    const refusal = async (status: number) => {
      try {
        await provider.send(sms(errorRecipient(status), 'x'));
      } catch (e) {
        return classifyError(e);
      }
      throw new Error('sent');
    };
    const dst = await refusal(ESME.RINVDSTADR);
    t.equal(dst.kind, 'permanent');
    t.equal(
      dst.recipientRefusal,
      'invalid_recipient',
      'ESME_RINVDSTADR → invalid_recipient: ENS suppresses the number',
    );
    // ENS sends every destination as international/ISDN: an SMSC refusing that refuses it for
    // everyone.
    for (const status of [0x50, 0x51, ESME.RINVSRCADR, ESME.RINVMSGLEN, ESME.RINVDCS, 0x106]) {
      const c = await refusal(status);
      t.equal(c.kind, 'permanent', `0x${status.toString(16)} permanent`);
      t.equal(c.recipientRefusal, undefined, `0x${status.toString(16)} suppresses no one`);
    }
    for (const status of [ESME.RSYSERR, ESME.RTHROTTLED])
      t.equal((await refusal(status)).recipientRefusal, undefined);
  },
);

t.test('an unanswered submit_sm is a transient timeout', async (t) => {
  const { smsc, provider, port } = await rig(t, { submitTimeoutMs: 200 });
  await smsc.waitFor(() => smsc.boundCount === 1);
  smsc.stallSubmits = true;
  t.same(await sendError(provider, sms('+15551234567', 'x')), {
    kind: 'transient',
    message: `smpp: no submit_sm_resp from 127.0.0.1:${port} within 200 ms`,
    retryAfterMs: undefined,
  });
  smsc.stallSubmits = false;
  smsc.releaseStalled(); // a late answer is ignored
  t.ok((await provider.send(sms('+15551234567', 'y'))).providerMessageId);
});

t.test('windowSize bounds the submit_sm in flight', async (t) => {
  const { smsc, provider } = await rig(t, { windowSize: 2, submitTimeoutMs: 3_000 });
  await smsc.waitFor(() => smsc.boundCount === 1);
  smsc.stallSubmits = true;
  const sends = [1, 2, 3].map((i) => provider.send(sms('+15551234567', `m${i}`)));
  await smsc.waitFor(() => smsc.submits.length === 2, 2_000, 'two submits');
  await smsc.enquireLink(); // a round trip on the session: the third submit would be in by now
  await new Promise((r) => setTimeout(r, 50));
  t.equal(smsc.submits.length, 2, 'the third waits for a free slot');
  smsc.stallSubmits = false;
  smsc.releaseStalled();
  const ids = (await Promise.all(sends)).map((r) => r.providerMessageId);
  t.equal(new Set(ids).size, 3, 'all three sent');
  t.same(
    smsc.submits.map((s) => s.text),
    ['m1', 'm2', 'm3'],
  );
});

t.test('reconnects after the SMSC drops the connection; a send after that succeeds', async (t) => {
  const { smsc, ctx, provider } = await rig(t);
  await smsc.waitFor(() => smsc.boundCount === 1);
  smsc.dropConnections();
  await smsc.waitFor(() => smsc.binds.length === 2 && smsc.boundCount === 1, 3_000, 'rebind');
  t.ok(
    ctx.logs.some(
      (l) =>
        l.level === 'warn' &&
        /lost \(the SMSC closed the connection\); reconnecting/.test(l.msg ?? ''),
    ),
    'logged the loss',
  );
  t.ok((await provider.send(sms('+15551234567', 'after reconnect'))).providerMessageId);
});

t.test(
  'while the SMSC is down a send is transient "not bound"; it recovers when the SMSC is back',
  async (t) => {
    const { smsc, ctx, provider, port } = await rig(t);
    await smsc.waitFor(() => smsc.boundCount === 1);
    await smsc.stop();
    await smsc.waitFor(
      () => ctx.logs.some((l) => /lost/.test(l.msg ?? '')),
      2_000,
      'the client to notice',
    );
    const r = await sendError(provider, sms('+15551234567', 'x'));
    t.equal(r.kind, 'transient');
    t.match(r.message, new RegExp(`^smpp: not bound to 127\\.0\\.0\\.1:${port}: `));
    await smsc.start(port);
    await smsc.waitFor(() => smsc.boundCount === 1, 3_000, 'rebind');
    t.ok((await provider.send(sms('+15551234567', 'y'))).providerMessageId);
  },
);

t.test(
  'the start does not fail when the SMSC is down; the provider binds once it is up',
  async (t) => {
    const smsc = new FakeSmsc({ systemId: 'ens', password: 'secret' });
    const { port } = await smsc.start();
    await smsc.stop();
    const ctx = recordingContext();
    const provider = await plugin.create(
      {
        host: '127.0.0.1',
        port,
        systemId: 'ens',
        password: 'secret',
        reconnectMinMs: 20,
        reconnectMaxMs: 50,
      },
      ctx,
    );
    t.teardown(async () => {
      await provider.close?.();
      await smsc.stop();
    });
    t.match(await sendError(provider, sms('+15551234567', 'x')), {
      kind: 'transient',
      message: /^smpp: not bound to 127\.0\.0\.1:\d+: .*ECONNREFUSED/,
    });
    const failedAttempt =
      /^smpp: cannot bind to 127\.0\.0\.1:\d+ \(.*ECONNREFUSED.*\); retrying in \d+ ms$/;
    await smsc.waitFor(
      () => ctx.logs.some((l) => l.level === 'warn' && failedAttempt.test(l.msg ?? '')),
      2_000,
      'the log',
    );
    t.pass('each failed attempt is logged as a warning');
    await smsc.start(port);
    await smsc.waitFor(() => smsc.boundCount === 1, 3_000, 'bind');
    t.ok((await provider.send(sms('+15551234567', 'y'))).providerMessageId);
  },
);

t.test(
  'binds refused for a while: sends are transient with the reason, then it binds again',
  async (t) => {
    const { smsc, ctx, provider } = await rig(t);
    await smsc.waitFor(() => smsc.boundCount === 1);
    smsc.refuseBinds(ESME.RBINDFAIL);
    smsc.dropConnections();
    await smsc.waitFor(
      () => smsc.binds.filter((b) => b.status === ESME.RBINDFAIL).length >= 2,
      3_000,
      'refused binds',
    );
    const r = await sendError(provider, sms('+15551234567', 'x'));
    t.equal(r.kind, 'transient');
    t.match(
      r.message,
      /^smpp: not bound to 127\.0\.0\.1:\d+: bind_transceiver refused: ESME_RBINDFAIL \(0x0D\): Bind Failed/,
    );
    t.ok(
      ctx.logs.some((l) => l.level === 'error' && /refused: ESME_RBINDFAIL/.test(l.msg ?? '')),
      'logged as an error',
    );
    smsc.acceptBinds();
    await smsc.waitFor(() => smsc.boundCount === 1, 3_000, 'rebind');
    t.ok((await provider.send(sms('+15551234567', 'y'))).providerMessageId);
  },
);

t.test(
  'wrong password: ESME_RINVPASWD, sends transient, checkCredentials rejects, keeps retrying',
  async (t) => {
    const { smsc, ctx, provider } = await rig(t, { password: 'Xyzzy42' });
    const r = await sendError(provider, sms('+15551234567', 'x'));
    t.equal(r.kind, 'transient');
    t.match(r.message, /bind_transceiver refused: ESME_RINVPASWD \(0x0E\): Invalid Password$/);
    await t.rejects(provider.checkCredentials!(), {
      ensErrorKind: 'transient',
      message: /ESME_RINVPASWD/,
    });
    t.equal(smsc.binds[0]!.status, ESME.RINVPASWD);
    t.match(
      ctx.logs.find((l) => l.level === 'error')?.msg,
      /ESME_RINVPASWD \(0x0E\): Invalid Password \(check systemId, password and systemType\); retrying with back-off/,
    );
    await smsc.waitFor(() => smsc.binds.length >= 3, 3_000, 'retries');
    t.notMatch(JSON.stringify(ctx.logs), /Xyzzy42/, 'the password is never logged');
    t.equal(smsc.submits.length, 0);
  },
);

t.test('checkCredentials resolves when bound', async (t) => {
  const { provider } = await rig(t);
  await provider.checkCredentials!();
  t.pass('bound');
});

t.test('enquire_link: sent on the timer, and answered when the SMSC sends one', async (t) => {
  const { smsc } = await rig(t, { enquireLinkMs: 50 });
  await smsc.waitFor(
    () => smsc.received.filter((r) => r.command === 'enquire_link').length >= 3,
    2_000,
    'keep-alives',
  );
  t.equal(await smsc.enquireLink(), 1, 'the client answered enquire_link_resp');
  t.equal(smsc.binds.length, 1, 'no reconnect while answered');
});

t.test('a missing enquire_link_resp drops the link and reconnects', async (t) => {
  const { smsc, ctx, provider } = await rig(t, { enquireLinkMs: 50 });
  await smsc.waitFor(() => smsc.boundCount === 1);
  smsc.ignoreEnquireLink = true;
  await smsc.waitFor(() => smsc.binds.length >= 2, 3_000, 'reconnect');
  t.ok(
    ctx.logs.some(
      (l) =>
        l.level === 'warn' &&
        /^smpp: connection to 127\.0\.0\.1:\d+ lost \(no enquire_link_resp within 50 ms\); reconnecting in \d+ ms$/.test(
          l.msg ?? '',
        ),
    ),
  );
  smsc.ignoreEnquireLink = false;
  await smsc.waitFor(() => smsc.boundCount === 1, 3_000, 'bound');
  t.ok((await provider.send(sms('+15551234567', 'y'))).providerMessageId);
});

t.test('an unbind from the SMSC is answered, and the provider binds again', async (t) => {
  const { smsc, provider } = await rig(t);
  await smsc.waitFor(() => smsc.boundCount === 1);
  t.equal(await smsc.unbindAll(), 1, 'unbind_resp received');
  await smsc.waitFor(() => smsc.binds.length === 2 && smsc.boundCount === 1, 3_000, 'rebind');
  t.ok((await provider.send(sms('+15551234567', 'y'))).providerMessageId);
});

t.test('close() unbinds, stops reconnecting, and sends fail afterwards', async (t) => {
  const { smsc, provider } = await rig(t);
  await provider.send(sms('+15551234567', 'x'));
  await provider.close!();
  t.ok(
    smsc.received.some((r) => r.command === 'unbind'),
    'the SMSC received unbind',
  );
  await smsc.waitFor(() => smsc.boundCount === 0, 1_000, 'the session to end');
  await provider.close!();
  t.match(await sendError(provider, sms('+15551234567', 'y')), {
    kind: 'transient',
    message: /the provider is closed/,
  });
  await new Promise((r) => setTimeout(r, 150)); // several reconnect intervals (20-100 ms)
  t.equal(smsc.binds.length, 1, 'no reconnect after close');
});

t.test(
  'transmitter+receiver: two binds; submits on the transmitter, receipts on the receiver',
  async (t) => {
    const { smsc, ctx, provider } = await rig(t, { bindMode: 'transmitter+receiver' });
    const { providerMessageId } = await provider.send(sms('+15551234567', 'two sessions'));
    await smsc.waitFor(() => smsc.boundCount === 2, 2_000, 'both binds');
    t.same(smsc.binds.map((b) => b.command).sort(), ['bind_receiver', 'bind_transmitter']);
    const tx = smsc.binds.find((b) => b.command === 'bind_transmitter')!.connection;
    t.equal(smsc.submits[0]!.connection, tx);
    t.equal((await reportFor(ctx, providerMessageId))?.status, 'delivered');
    const rx = smsc.binds.find((b) => b.command === 'bind_receiver')!.connection;
    await smsc.waitFor(
      () => smsc.received.some((r) => r.command === 'deliver_sm_resp'),
      2_000,
      'deliver_sm_resp',
    );
    t.ok(
      smsc.received.some((r) => r.command === 'deliver_sm_resp' && r.connection === rx),
      'deliver_sm_resp on the receiver session',
    );
    t.equal(
      await smsc.sendMo({ from: '+15557651234', to: '12345', text: 'STOP' }),
      0,
      'an MO STOP on the receiver session',
    );
    t.equal(ctx.recipientReports[0]?.kind, 'opt_out');
    await provider.checkCredentials!();
    await provider.close!();
    t.equal(smsc.received.filter((r) => r.command === 'unbind').length, 2, 'both sessions unbind');
  },
);

/** A self-signed certificate for 127.0.0.1, or null when openssl is not installed. */
function testCertificate(): { key: string; cert: string } | null {
  const dir = mkdtempSync(path.join(tmpdir(), 'ens-smpp-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ],
      { stdio: 'ignore' },
    );
    return {
      key: readFileSync(path.join(dir, 'key.pem'), 'utf8'),
      cert: readFileSync(path.join(dir, 'cert.pem'), 'utf8'),
    };
  } catch {
    return null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const testCert = testCertificate();

t.test(
  'TLS: verifies the SMSC certificate, trusting tlsCa',
  { skip: testCert ? false : 'openssl is not available to make a test certificate' },
  async (t) => {
    const tls = testCert!;
    const cert = tls.cert;
    const { ctx, provider } = await rig(t, { tls: true, tlsCa: cert }, { tls });
    const { providerMessageId } = await provider.send(sms('+15551234567', 'over TLS'));
    t.equal((await reportFor(ctx, providerMessageId))?.status, 'delivered');

    const untrusted = await rig(t, { tls: true }, { tls });
    t.match(await sendError(untrusted.provider, sms('+15551234567', 'x')), {
      kind: 'transient',
      message: /^smpp: not bound to .*self.signed certificate/,
    });
    t.equal(untrusted.smsc.binds.length, 0, 'no credentials sent to an unverified SMSC');
  },
);
