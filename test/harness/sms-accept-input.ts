import { randomUUID } from 'node:crypto';
import type { AcceptInput } from '@ens/core';

/**
 * What the api role hands the accept for one sms handoff of tenant "t", without a callback: for
 * tests that accept straight through the store. (service.ts's `smsHandoff` is the HTTP body of a
 * send, for tests that go through the API.)
 */
export function smsAcceptInput(
  clientId: string,
  key: string,
  recipients: readonly string[],
): AcceptInput {
  const handoffId = randomUUID();
  return {
    clientId,
    idempotencyKey: key,
    requestHash: 'h',
    responseBody: JSON.stringify({ id: handoffId }),
    handoffId,
    tenant: 't',
    eventType: 'e',
    reference: null,
    callbackUrl: null,
    messages: { sms: { body: 'x' } },
    deliveries: recipients.map((recipient) => ({ id: randomUUID(), channel: 'sms', recipient })),
    quota: () => 0,
  };
}
