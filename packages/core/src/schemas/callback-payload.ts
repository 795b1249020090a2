import { CALLBACK_FIELDS, pickFields } from '../domain/delivery-record.ts';
import type { CallbackPayload } from './delivery.ts';

/**
 * Serialises a callback body: exactly the spec's fields, in the spec's order (CALLBACK_FIELDS), and
 * nothing else, whatever else `p` holds (a row read with more of the record). Every post of one
 * callback sends the same bytes, so the signature always covers what was first built: the body is
 * stored whole (callbacks before migration 019), or rebuilt from its identity and its snapshot
 * (callbackBody), which gives the same bytes every time.
 */
export function serialiseCallback(p: CallbackPayload): string {
  return JSON.stringify(pickFields(p, CALLBACK_FIELDS));
}

/** The payload's fields a delivery row never changes after its accept: read from it at the post. */
const IDENTITY_FIELDS = ['delivery_id', 'reference', 'channel', 'recipient'] as const;

export type CallbackIdentity = Pick<CallbackPayload, (typeof IDENTITY_FIELDS)[number]>;

/** The others, as the callback's event saw them: kept with the callback, in CALLBACK_FIELDS order. */
const SNAPSHOT_FIELDS = CALLBACK_FIELDS.filter(
  (f): f is Exclude<(typeof CALLBACK_FIELDS)[number], (typeof IDENTITY_FIELDS)[number]> =>
    !(IDENTITY_FIELDS as readonly string[]).includes(f),
);

/**
 * What a callback keeps of its payload (migration 019): the fields that can change after the event,
 * as a JSON array, about 100 bytes where the whole body is about 300. Saves ~0.2 KB of WAL per
 * callback, and as much of the callbacks table.
 */
export function callbackSnapshot(p: CallbackPayload): string {
  return JSON.stringify(SNAPSHOT_FIELDS.map((f) => p[f] ?? null));
}

/** The body a snapshot stands for: the same bytes serialiseCallback gave for the whole payload. */
export function callbackBody(identity: CallbackIdentity, snapshot: string): string {
  const values: unknown = JSON.parse(snapshot);
  if (!Array.isArray(values) || values.length !== SNAPSHOT_FIELDS.length)
    throw new Error(
      `a callback snapshot of ${SNAPSHOT_FIELDS.length} values was expected: ${snapshot}`,
    );
  const state = Object.fromEntries(SNAPSHOT_FIELDS.map((f, i) => [f, values[i]]));
  return serialiseCallback({ ...identity, ...state } as CallbackPayload);
}
