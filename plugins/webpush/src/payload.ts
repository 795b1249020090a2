import type { OutboundMessage } from '@ens/plugin-sdk';

/**
 * What the service worker's `push` event receives (`event.data.json()`), documented in the README.
 * Field names follow ENS's API (snake_case), so the same names appear in the message the caller
 * posted and in the worker that shows it.
 */
export interface PushPayload {
  /** content.subject; absent when the message has none. */
  title?: string;
  /** content.body. */
  body: string;
  /** content.data, the caller's string map; {} when absent. */
  data: Record<string, string>;
  /** ENS's delivery id: lets the page or worker tie a click back to the delivery. */
  delivery_id: string;
  event_type: string;
  reference: string | null;
}

export function buildPayload(m: OutboundMessage): PushPayload {
  const c = m.content;
  const data: Record<string, string> = {};
  if (c.data !== null && typeof c.data === 'object') {
    for (const [k, v] of Object.entries(c.data as Record<string, unknown>))
      data[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  return {
    ...(typeof c.subject === 'string' ? { title: c.subject } : {}),
    body: typeof c.body === 'string' ? c.body : '',
    data,
    delivery_id: m.deliveryId,
    event_type: m.eventType,
    reference: m.reference,
  };
}
