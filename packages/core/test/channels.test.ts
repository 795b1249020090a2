import t from 'tap';
import { sampleMessage } from '@ens/plugin-sdk/conformance';
import {
  addressWording,
  CHANNEL_RULES,
  CHANNELS,
  Handoff,
  normaliseAddress,
  planDeliveries,
  type Content,
} from '@ens/core';

/**
 * One row per channel (packages/core/src/domain/channels.ts): the rules, the schema's bound on
 * message entries and both sample messages (the OpenAPI send example, the conformance kit's) agree.
 */

const plan = (
  channel: (typeof CHANNELS)[number],
  recipients: readonly string[],
  content: Content,
) =>
  planDeliveries(
    { tenant: 't', event_type: 'e', messages: [{ channel, recipients: [...recipients], content }] },
    { maxRecipients: 10 },
  );

const refusal = (fn: () => unknown): string[] | null => {
  try {
    fn();
    return null;
  } catch (e) {
    return ((e as { errors?: { path: string; message: string }[] }).errors ?? []).map(
      (x) => `${x.path} ${x.message}`,
    );
  }
};

t.test(
  'the table has one row per channel of the SDK, and the schema one entry per channel at most',
  async (t) => {
    t.same(Object.keys(CHANNEL_RULES).sort(), [...CHANNELS].sort());
    t.equal((Handoff.properties.messages as { maxItems?: number }).maxItems, CHANNELS.length);
  },
);

t.test("each channel's sample message is accepted by its own rules", async (t) => {
  for (const channel of CHANNELS) {
    const { recipients, content } = CHANNEL_RULES[channel].sample;
    t.equal(
      plan(channel, recipients, content).length,
      recipients.length,
      `${channel}: one delivery per sample recipient`,
    );
  }
});

t.test("the conformance kit's sample of each channel is a message ENS accepts", async (t) => {
  for (const channel of CHANNELS) {
    const m = sampleMessage(channel);
    t.equal(
      refusal(() => plan(channel, [m.recipient], m.content as Content)),
      null,
      channel,
    );
  }
});

t.test('a content field is accepted exactly on the channels whose row lists it', async (t) => {
  const values: Record<string, unknown> = {
    body: 'x',
    subject: 's',
    html: '<p>x</p>',
    data: { k: 'v' },
    template_name: 'n',
    language: 'en',
    body_params: ['p'],
    url_button_suffix: 'u',
    inline_images: [{ cid: 'a', data: 'AA==' }],
  };
  for (const channel of CHANNELS) {
    const rules = CHANNEL_RULES[channel];
    const base = rules.sample.content;
    for (const [field, value] of Object.entries(values)) {
      const content = {
        ...base,
        [field]: value,
        ...(field === 'inline_images' ? { html: '<p>x</p>' } : {}),
      } as Content;
      const notAccepted = (
        refusal(() => plan(channel, rules.sample.recipients, content)) ?? []
      ).some((m) => m.endsWith(`${field} is not accepted for ${channel}`));
      t.equal(notAccepted, !rules.fields.includes(field as never), `${channel} ${field}`);
    }
  }
});

t.test('each channel names what its recipient must be', async (t) => {
  for (const channel of CHANNELS) {
    const { content } = CHANNEL_RULES[channel].sample;
    t.same(
      refusal(() => plan(channel, ['  '], content)),
      [`/messages/0/recipients/0 "  " is not ${CHANNEL_RULES[channel].recipientIs}`],
      channel,
    );
  }
});

t.test('the email recipient rule: the domain is lower-cased, the local part kept', async (t) => {
  t.same(plan('email', ['  Ann@Example.COM '], CHANNEL_RULES.email.sample.content), [
    { channel: 'email', recipient: 'Ann@example.com' },
  ]);
  t.equal(CHANNEL_RULES.email.normaliseRecipient('ann@example'), null, 'a domain needs a dot');
  t.equal(
    CHANNEL_RULES.email.normaliseRecipient(`${'a'.repeat(250)}@x.io`),
    null,
    'at most 254 characters',
  );
});

t.test('the flags that set channels apart', async (t) => {
  t.same(
    CHANNELS.filter((c) => CHANNEL_RULES[c].fansOutToDevices),
    ['push'],
  );
  t.same(
    CHANNELS.filter((c) => CHANNEL_RULES[c].readReceipts),
    ['whatsapp'],
  );
  t.same(
    CHANNELS.filter((c) => CHANNEL_RULES[c].mustDeliverPassesOptOut),
    ['email', 'push'],
    'an sms or whatsapp STOP stops everything',
  );
});

t.test("the suppression list keys each channel's addresses by its row", async (t) => {
  for (const c of CHANNELS) {
    const rules = CHANNEL_RULES[c];
    for (const r of rules.sample.recipients) {
      const stored = rules.normaliseRecipient(r)!;
      t.ok(normaliseAddress(c, stored), `${c}: a stored recipient (${stored}) has a key`);
    }
    t.equal(normaliseAddress(c, '   '), null, `${c}: blank is no address`);
  }
  t.same(
    CHANNELS.filter((c) => CHANNEL_RULES[c].address.foldsCase),
    ['email'],
    'only email keys fold case (the claim reads `channel = ...` for it)',
  );
  t.equal(addressWording('email'), 'an email address (name@domain)');
  t.equal(
    addressWording('sms', { inPath: true }),
    'a phone number (E.164, such as +15551230001; in a path, + is %2B)',
  );
  t.equal(addressWording('push', { inPath: true }), 'a user id (without control characters)');
});
