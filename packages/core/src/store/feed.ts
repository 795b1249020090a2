import type { Db } from '../db/pool.ts';
import { isoSql } from '../db/pool.ts';
import { Errors } from '../errors.ts';
import type { DeliveryPage, DeliveryQuery, DeliveryRecord } from '../schemas/delivery.ts';
import { isIsoTimestamp } from '../timestamps.ts';

const RECORD_COLUMNS = `id AS delivery_id, reference, channel, recipient, status, attempts, provider_message_id,
  ${isoSql('sent_at')} AS sent_at, ${isoSql('delivered_at')} AS delivered_at, ${isoSql('read_at')} AS read_at,
  last_error, tenant, event_type, ${isoSql('bounced_at')} AS bounced_at, ${isoSql('complained_at')} AS complained_at, ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at`;

/** The cursor is opaque to callers: base64url of the last row's feed stamp. */
function encodeCursor(updatedAt: string): string {
  return Buffer.from(JSON.stringify({ u: updatedAt })).toString('base64url');
}

function decodeCursor(cursor: string): string {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { u?: unknown };
    if (typeof v.u === 'string' && isIsoTimestamp(v.u)) return v.u;
  } catch {
    // fall through to the error below
  }
  throw Errors.validation('cursor is not a next_cursor this service returned', [{ path: '/cursor', message: 'unknown cursor' }]);
}

/**
 * One page of a client's change feed, in feed-stamp order. Rows appear once the feed role has
 * stamped them (within a fraction of a second of the change); because stamps are assigned in commit
 * order by a single writer, walking with updated_since/cursor never skips a change.
 */
export async function readFeed(db: Db, clientId: string, q: DeliveryQuery): Promise<DeliveryPage> {
  if (q.updated_since !== undefined && !isIsoTimestamp(q.updated_since)) {
    throw Errors.validation('updated_since must be an ISO 8601 date-time with an offset, such as 2026-01-31T12:00:00.000000+00:00', [
      { path: '/updated_since', message: 'not an ISO 8601 date-time with offset' },
    ]);
  }
  const after = q.cursor !== undefined ? decodeCursor(q.cursor) : (q.updated_since ?? null);
  const limit = q.limit ?? 100;
  const { rows } = await db.query<DeliveryRecord>(
    // ORDER BY names the table's column: the bare name would bind to the formatted text alias in
    // the select list and sort every row of the client instead of walking deliveries_feed.
    `SELECT ${RECORD_COLUMNS} FROM deliveries d
      WHERE client_id = $1 AND d.updated_at IS NOT NULL
        AND ($2::timestamptz IS NULL OR d.updated_at > $2::timestamptz)
        AND ($3::text IS NULL OR reference = $3) AND ($4::text IS NULL OR tenant = $4)
        AND ($5::text IS NULL OR channel = $5) AND ($6::text IS NULL OR status = $6)
      ORDER BY d.updated_at LIMIT $7`,
    [clientId, after, q.reference ?? null, q.tenant ?? null, q.channel ?? null, q.status ?? null, limit],
  );
  const last = rows[rows.length - 1];
  return { results: rows, next_cursor: rows.length === limit && last ? encodeCursor(last.updated_at) : null };
}
