import type { Db } from '../db/pool.ts';
import { deliveryCreatedAfter } from '../store/read-models/delivery-presence.ts';
import { readDeliveryToken } from './delivery-token.ts';

/**
 * The delivery a one-click unsubscribe link names while the link still works: the token was
 * signed with this key for `unsubscribe`, and its delivery is still in the record, created less
 * than `ttlMs` ago (ENS_UNSUBSCRIBE_TTL). Null for anything else, whatever the reason, so that a
 * caller answering "not found" tells a forged, malformed, expired or retention-removed link apart
 * from none of the others. A forged or malformed token is refused before any query.
 */
export async function liveUnsubscribeDelivery(
  db: Db,
  key: Buffer,
  token: string,
  ttlMs: number,
  now: Date = new Date(),
): Promise<string | null> {
  const id = readDeliveryToken(key, 'unsubscribe', token);
  if (id === null) return null;
  return (await deliveryCreatedAfter(db, id, new Date(now.getTime() - ttlMs))) ? id : null;
}
