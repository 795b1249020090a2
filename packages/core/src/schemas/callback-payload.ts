import { CALLBACK_FIELDS, pickFields } from '../domain/delivery-record.ts';
import type { CallbackPayload } from './delivery.ts';

/**
 * Serialises a callback body: exactly the spec's fields, in the spec's order (CALLBACK_FIELDS), and
 * nothing else, whatever else `p` holds (a row read with more of the record). The bytes are stored
 * once and re-posted unchanged on every retry, so the signature always covers what was first built.
 */
export function serialiseCallback(p: CallbackPayload): string {
  return JSON.stringify(pickFields(p, CALLBACK_FIELDS));
}
