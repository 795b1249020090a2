import t from 'tap';
import { normalisePhone, planDeliveries, type Handoff } from '@ens/core';

const sms = (recipients: string[]): Handoff['messages'][number] => ({
  channel: 'sms',
  recipients,
  content: { kind: 'rendered', body: 'x' },
});
const handoff = (messages: Handoff['messages']): Handoff => ({
  tenant: 't',
  event_type: 'e',
  messages,
});
const codes = (fn: () => unknown) => {
  try {
    fn();
    return null;
  } catch (e) {
    return {
      code: (e as { code: string }).code,
      paths: ((e as { errors: { path: string }[] }).errors ?? []).map((x) => x.path),
    };
  }
};

t.test('phone numbers normalise to + and 8–15 digits', async (t) => {
  t.equal(normalisePhone('15551230001'), '+15551230001');
  t.equal(normalisePhone('+1 (555) 123-0001'), '+15551230001');
  t.equal(normalisePhone('+44.20.7946.0958'), '+442079460958');
  t.equal(normalisePhone('1234567'), null, 'seven digits is too short');
  t.equal(normalisePhone('1234567890123456'), null, 'sixteen digits is too long');
  t.equal(normalisePhone('+0123456789'), null, 'no country code starts with 0');
  t.equal(normalisePhone('+1555abc0001'), null);
});

t.test('one delivery per distinct normalised recipient per channel', async (t) => {
  const planned = planDeliveries(
    handoff([sms(['+15551230001', '15551230001', '+1 555 123 0002'])]),
    { maxRecipients: 10 },
  );
  t.same(planned, [
    { channel: 'sms', recipient: '+15551230001' },
    { channel: 'sms', recipient: '+15551230002' },
  ]);
});

t.test('every problem is reported at once, each at its path', async (t) => {
  const r = codes(() =>
    planDeliveries(
      handoff([
        sms(['nope']),
        {
          channel: 'sms',
          recipients: ['+15551230001'],
          content: { kind: 'template', template_name: 'x', language: 'en' },
        },
        {
          channel: 'whatsapp',
          recipients: ['+15551230001'],
          content: { kind: 'template', body_params: ['a\tb', 'c    d', 'e   f'] },
        },
        {
          channel: 'email',
          recipients: ['not-an-address'],
          content: {
            kind: 'rendered',
            body: 'x',
            inline_images: [
              { cid: 'a', data: 'AA==' },
              { cid: 'a', data: 'AA==' },
            ],
            data: { k: 'v' },
          },
        },
      ]),
      { maxRecipients: 10 },
    ),
  );
  t.equal(r?.code, 'ENS_ERR_VALIDATION');
  t.same(
    [...(r?.paths ?? [])].sort(),
    [
      '/messages/0/recipients/0',
      '/messages/1/channel',
      '/messages/1/content/kind',
      '/messages/1/content/template_name',
      '/messages/1/content/language',
      '/messages/2/content/template_name',
      '/messages/2/content/language',
      '/messages/2/content/body_params/0',
      '/messages/2/content/body_params/1',
      '/messages/3/content/html',
      '/messages/3/content/inline_images/1/cid',
      '/messages/3/content/data',
      '/messages/3/recipients/0',
    ].sort(),
  );
});

t.test('recipient limit per entry', async (t) => {
  t.equal(
    codes(() =>
      planDeliveries(handoff([sms(['+15551230001', '+15551230002'])]), { maxRecipients: 1 }),
    )?.code,
    'ENS_ERR_VALIDATION',
  );
  t.equal(
    codes(() => planDeliveries(handoff([sms(['+15551230001'])]), { maxRecipients: 1 })),
    null,
  );
});
