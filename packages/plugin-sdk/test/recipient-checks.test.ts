import { EventEmitter } from 'node:events';
import t from 'tap';
import { Type } from 'typebox';
import {
  definePlugin,
  permanentError,
  recipientError,
  smsKeyword,
  type PluginContext,
  type ProviderPlugin,
} from '@ens/plugin-sdk';
import {
  runConformance,
  sampleMessage,
  type CheckResult,
  type ConformanceFixture,
  type ConformanceTarget,
} from '@ens/plugin-sdk/conformance';

/**
 * The conformance kit's SDK 1.3 checks: recipient refusals, reports about recipients from webhooks
 * and from the provider's own connection, and the sdk range they need. One in-memory plugin that
 * does everything right, and one fault at a time that the kit must name.
 */

const SENDER = '+15005550006';
const TEXTER = '+15557651234';

interface Faults {
  sdk?: string;
  /** Refuse the opted-out recipient with a plain permanent error. */
  plainRefusal?: boolean;
  /** Report a STOP even when the key is wrong. */
  reportForged?: boolean;
  /** Report HELP as an opt-out. */
  reportHelp?: boolean;
  /** Say the sender is not the default. */
  wrongSender?: boolean;
  /** Ignore mobile-originated messages from the connection. */
  ignoreMo?: boolean;
}

/** A provider whose "connection" is an EventEmitter: `mo` events are texts a phone sent in. */
function plugin(f: Faults, line: EventEmitter): ProviderPlugin {
  return definePlugin({
    name: 'probe',
    channels: ['sms'],
    sdk: f.sdk ?? '^1.3.0',
    configSchema: Type.Object({}, { additionalProperties: false }),
    create(_config, context: PluginContext) {
      const report = (kind: 'opt_out' | 'opt_in', from: string, text: string) =>
        context.reportRecipient({
          kind,
          address: from,
          channel: 'sms',
          sender: { id: SENDER, isDefault: !f.wrongSender },
          at: new Date(),
          detail: `probe: "${text}"`,
        });
      const onMo = async (from: string, text: string, done: () => void) => {
        const k = smsKeyword(text);
        if (!f.ignoreMo && (k === 'opt_out' || k === 'opt_in')) await report(k, from, text);
        done();
      };
      line.on('mo', onMo);
      return {
        async send(m) {
          if (m.recipient.endsWith('0000'))
            throw recipientError(`probe 1: ${m.recipient} does not exist`, 'invalid_recipient');
          if (m.recipient.endsWith('0001'))
            throw f.plainRefusal
              ? permanentError('probe 2: opted out')
              : recipientError('probe 2: opted out', 'opt_out');
          if (m.recipient.endsWith('9999')) throw permanentError('probe 3: the text is too long');
          return { providerMessageId: `p-${m.deliveryId}` };
        },
        routes: [
          {
            method: 'POST' as const,
            path: '/inbound',
            async handler(req) {
              const { from, text } = JSON.parse(req.rawBody.toString('utf8')) as {
                from: string;
                text: string;
              };
              const genuine = req.headers['x-key'] === 'k';
              if (!genuine && !f.reportForged) return { status: 403 };
              const k = smsKeyword(text);
              if (k === 'help' && f.reportHelp) await report('opt_out', from, text);
              else if (k === 'opt_out' || k === 'opt_in') await report(k, from, text);
              return genuine ? { status: 200 } : { status: 403 };
            },
          },
        ],
        async close() {
          line.off('mo', onMo);
        },
      };
    },
  }) as ProviderPlugin;
}

function fixture(line: EventEmitter): ConformanceFixture {
  const post = (text: string, key = 'k') => ({
    method: 'POST' as const,
    path: '/inbound',
    headers: { 'x-key': key },
    body: JSON.stringify({ from: TEXTER, text }),
  });
  const mo = (text: string) => () =>
    new Promise<void>((resolve) => void line.emit('mo', TEXTER, text, resolve));
  const stopFromTexter = {
    address: TEXTER,
    channel: 'sms' as const,
    sender: { id: SENDER, isDefault: true },
  };
  return {
    async start(): Promise<ConformanceTarget> {
      return {
        config: {},
        sends: {
          accepted: sampleMessage('sms'),
          permanent: sampleMessage('sms', { recipient: '+15550009999' }),
        },
        recipientRefusals: [
          {
            send: sampleMessage('sms', { recipient: '+15550000000' }),
            refusal: 'invalid_recipient',
          },
          { send: sampleMessage('sms', { recipient: '+15550000001' }), refusal: 'opt_out' },
        ],
        recipientEvents: [
          {
            name: 'an MO STOP',
            trigger: mo('STOP'),
            recipientReport: { kind: 'opt_out', ...stopFromTexter },
            withinMs: 500,
          },
          {
            name: 'an MO that is not a keyword',
            trigger: mo('see you at 5'),
            recipientReport: null,
            withinMs: 50,
          },
        ],
        webhooks: () => ({
          genuine: [
            { ...post('Stop'), recipientReport: { kind: 'opt_out', ...stopFromTexter } },
            { ...post('start'), recipientReport: { kind: 'opt_in', address: TEXTER } },
            { ...post('HELP'), recipientReport: null },
          ],
          forged: [post('STOP', 'guess')],
        }),
        async stop() {},
      };
    },
  };
}

async function run(f: Faults): Promise<CheckResult[]> {
  const line = new EventEmitter();
  return runConformance('probe', { default: plugin(f, line) }, fixture(line));
}

const failed = (results: CheckResult[]) =>
  results.filter((r) => !r.ok).map((r) => `${r.name}: ${r.detail}`);

t.test(
  'a plugin that refuses and reports recipients as SDK 1.3 asks passes every check',
  async (t) => {
    const results = await run({});
    t.same(failed(results), []);
    const names = results.map((r) => r.name);
    t.ok(
      names.includes(
        'a refusal about the recipient (1: +15550000000) is a permanent error marked ' +
          'invalid_recipient',
      ),
    );
    t.ok(
      names.includes(
        'a refusal about the recipient (2: +15550000001) is a permanent error marked opt_out',
      ),
    );
    t.ok(
      names.includes(
        'sdk range starts at 1.3.0 or later, as the plugin refuses or reports recipients (SDK 1.3)',
      ),
    );
    t.ok(
      names.includes(
        'genuine webhook 1 (POST /inbound) is answered 2xx and reports the recipient opt_out',
      ),
    );
    t.ok(
      names.includes(
        'genuine webhook 3 (POST /inbound) is answered 2xx and reports nothing about the recipient',
      ),
    );
    t.ok(names.includes('an MO STOP is answered and reports the recipient opt_out'));
    t.ok(
      names.includes(
        'an MO that is not a keyword is answered and reports nothing about the recipient',
      ),
    );
    t.notOk(
      results.some((r) => r.skipped && /SDK 1\.3/.test(r.name)),
      'nothing of SDK 1.3 skipped',
    );
  },
);

t.test('each fault is named by the check it breaks', async (t) => {
  const cases: [string, Faults, RegExp, RegExp][] = [
    [
      'a refusal thrown as a plain permanent error',
      { plainRefusal: true },
      /^a refusal about the recipient \(2: /,
      /recipientRefusal is undefined, expected opt_out; throw recipientError/,
    ],
    [
      'an sdk range that admits 1.2',
      { sdk: '^1.0.0' },
      /^sdk range starts at 1\.3\.0/,
      /declare "\^1\.3\.0"/,
    ],
    [
      'a forged webhook that reports',
      { reportForged: true },
      /^forged webhook 1 /,
      /a forged request produced a report about a recipient/,
    ],
    [
      'a HELP reported as an opt-out',
      { reportHelp: true },
      /^genuine webhook 3 /,
      /reported about a recipient where nothing was to be reported/,
    ],
    [
      'the wrong sender',
      { wrongSender: true },
      /^genuine webhook 1 /,
      /sender \{"id":"\+15005550006","isDefault":false\}, expected/,
    ],
    [
      'an MO STOP not reported',
      { ignoreMo: true },
      /^an MO STOP /,
      /no opt_out report about a recipient/,
    ],
  ];
  for (const [what, f, check, detail] of cases) {
    const bad = failed(await run(f));
    t.ok(
      bad.some((b) => check.test(b) && detail.test(b)),
      `${what}: ${JSON.stringify(bad)}`,
    );
  }
});

t.test('smsKeyword reads an inbound text as carriers do', async (t) => {
  const cases: [string, string | null][] = [
    ['STOP', 'opt_out'],
    ['stop', 'opt_out'],
    ['  Stop.  ', 'opt_out'],
    ['STOP!', 'opt_out'],
    ['StopAll', 'opt_out'],
    ['stop all', 'opt_out'],
    ['UNSUBSCRIBE', 'opt_out'],
    ['cancel', 'opt_out'],
    ['End', 'opt_out'],
    ['QUIT', 'opt_out'],
    ['revoke', 'opt_out'],
    ['OPTOUT', 'opt_out'],
    ['opt-out', 'opt_out'],
    ['Opt out', 'opt_out'],
    ['START', 'opt_in'],
    ['yes', 'opt_in'],
    ['Unstop', 'opt_in'],
    ['HELP', 'help'],
    ['info', 'help'],
    ['stop texting me', null],
    ['STOP STOP', null],
    ['STOPP', null],
    ['', null],
    ['   ', null],
    ['yes please', null],
    ['S T O P', null],
    ['ＳＴＯＰ', null],
    ['STOP?', null],
    [`STOP${' '.repeat(3)}ALL`, null],
    ['x'.repeat(10_000), null],
  ];
  for (const [text, want] of cases)
    t.equal(smsKeyword(text), want, JSON.stringify(text.slice(0, 20)));
});
