import type { TSchema } from 'typebox';
import { CHANNEL_RULES, CHANNELS, type Channel } from '@ens/core';

/**
 * One valid handoff per channel, shown in the document for POST /v2/messages: each channel's sample
 * message from the channel table (CHANNEL_RULES in @ens/core). Each is accepted (202) by a running
 * ENS once its tenant `acme` is provisioned: test/api/openapi-live.test.ts posts every one. The
 * recipients take the sandbox's success path.
 */
export const SEND_EXAMPLES: Record<Channel, { summary: string; value: unknown }> =
  Object.fromEntries(
    CHANNELS.map((channel) => {
      const { summary, recipients, content } = CHANNEL_RULES[channel].sample;
      const value = {
        tenant: 'acme',
        event_type: 'order.shipped',
        reference: 'order-1001',
        callback_url: 'https://app.example.com/ens/callbacks',
        messages: [{ channel, recipients, content }],
      };
      return [channel, { summary, value }];
    }),
  ) as Record<Channel, { summary: string; value: unknown }>;

/**
 * The schema with named examples for the document (@fastify/swagger moves `x-examples` to the
 * media type's `examples`). A copy keeps TypeBox's non-enumerable markers; the validator ignores
 * the extra keyword.
 */
export function withExamples<T extends TSchema>(
  schema: T,
  examples: Record<string, { summary: string; value: unknown }>,
): T {
  const copy = Object.create(
    Object.getPrototypeOf(schema) as object,
    Object.getOwnPropertyDescriptors(schema),
  ) as T;
  return Object.assign(copy, { 'x-examples': examples });
}
