import type { TSchema } from 'typebox';

/**
 * One valid handoff per channel, shown in the document for POST /v2/messages. Each is accepted
 * (202) by a running ENS once its tenant `acme` is provisioned: test/api/openapi-live.test.ts
 * posts every one. The recipients take the sandbox's success path.
 */
export const SEND_EXAMPLES = {
  sms: {
    summary: 'An sms to two numbers',
    value: {
      tenant: 'acme',
      event_type: 'order.shipped',
      reference: 'order-1001',
      messages: [{ channel: 'sms', recipients: ['+15551230001', '+15551230002'], content: { kind: 'rendered', body: 'Your order 1001 has shipped.' } }],
    },
  },
  email: {
    summary: 'An email with a text and an HTML part',
    value: {
      tenant: 'acme',
      event_type: 'order.shipped',
      reference: 'order-1002',
      callback_url: 'https://app.example.com/ens/callbacks',
      messages: [
        {
          channel: 'email',
          recipients: ['ada@example.com'],
          content: { kind: 'rendered', subject: 'Your order has shipped', body: 'Order 1002 has shipped.', html: '<p>Order 1002 has shipped.</p>' },
        },
      ],
    },
  },
  push: {
    summary: "A push to every registered device of a user (recipients are the caller's user ids)",
    value: {
      tenant: 'acme',
      event_type: 'order.shipped',
      reference: 'order-1003',
      messages: [{ channel: 'push', recipients: ['user-42'], content: { kind: 'rendered', subject: 'Shipped', body: 'Order 1003 is on its way.', data: { order: '1003' } } }],
    },
  },
  whatsapp: {
    summary: 'A whatsapp template message',
    value: {
      tenant: 'acme',
      event_type: 'order.shipped',
      reference: 'order-1004',
      messages: [{ channel: 'whatsapp', recipients: ['+15551230004'], content: { kind: 'template', template_name: 'order_shipped', language: 'en', body_params: ['1004'] } }],
    },
  },
} as const;

/**
 * The schema with named examples for the document (@fastify/swagger moves `x-examples` to the
 * media type's `examples`). A copy keeps TypeBox's non-enumerable markers; the validator ignores
 * the extra keyword.
 */
export function withExamples<T extends TSchema>(schema: T, examples: Record<string, { summary: string; value: unknown }>): T {
  const copy = Object.create(Object.getPrototypeOf(schema) as object, Object.getOwnPropertyDescriptors(schema)) as T;
  return Object.assign(copy, { 'x-examples': examples });
}
