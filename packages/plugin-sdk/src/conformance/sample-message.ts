import type { Channel, OutboundMessage } from '../contract.ts';

const RECIPIENT: Record<Channel, string> = {
  sms: '+15550001234',
  whatsapp: '+15550001234',
  email: 'ada@example.com',
  push: 'user-42',
};

/**
 * Content as the API accepts it for each channel (interface.md's content object). Kept here rather
 * than read from ENS's channel table, because the SDK imports no other workspace;
 * packages/core/test/channels.test.ts checks that ENS accepts each of these messages.
 */
const CONTENT: Record<Channel, Record<string, unknown>> = {
  sms: { kind: 'rendered', body: 'conformance check' },
  email: {
    kind: 'rendered',
    subject: 'Conformance',
    body: 'conformance check',
    html: '<p>conformance check</p>',
  },
  push: { kind: 'rendered', subject: 'Conformance', body: 'conformance check' },
  whatsapp: { kind: 'template', template_name: 'conformance', language: 'en', body_params: [] },
};

/**
 * An OutboundMessage as ENS's worker builds it, for fixtures and tests: a valid message of the
 * channel, with whatever the fixture needs (recipient, content, device) given in `over`.
 */
export function sampleMessage(
  channel: Channel,
  over: Partial<OutboundMessage> = {},
): OutboundMessage {
  return {
    deliveryId: '0190a0b0-0000-7000-8000-000000000001',
    attempt: 1,
    channel,
    recipient: RECIPIENT[channel],
    tenant: 'conformance',
    tenantSettings: {},
    eventType: 'conformance.check',
    reference: null,
    content: CONTENT[channel],
    ...over,
  };
}
