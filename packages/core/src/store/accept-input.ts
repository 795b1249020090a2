import type { Channel } from '../schemas/channel.ts';

/*
 * What one accept stores, and what it answers: shared by accept.ts (the call) and
 * accept-batcher.ts (the batched write), so that the batcher does not import the module that
 * imports it.
 */

export interface AcceptInput {
  clientId: string;
  idempotencyKey: string;
  requestHash: string;
  /** The exact 202 body; stored so a replay answers byte for byte. */
  responseBody: string;
  handoffId: string;
  tenant: string;
  eventType: string;
  reference: string | null;
  callbackUrl: string | null;
  /** Messages as stored: inline image bytes already replaced by storage keys. */
  messages: unknown;
  deliveries: { id: string; channel: Channel; recipient: string }[];
  /** Which deliveries use which media objects (inline images); absent when there are none. */
  mediaRefs?: { key: string; deliveryId: string }[];
  /** Daily quota per channel for this client (0 = unlimited). */
  quota: (channel: Channel) => number;
  /**
   * W3C traceparent of the accept's span, stored so the worker's and callbacks' spans join its
   * trace; absent when untraced.
   */
  traceparent?: string | null;
}

export type AcceptOutcome =
  | { outcome: 'created'; responseBody: string }
  | { outcome: 'replay'; responseBody: string };
