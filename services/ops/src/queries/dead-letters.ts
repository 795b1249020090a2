import { type DeadLetter } from '@ens/core';
import { isoSql, type Db } from '@ens/core/internal';

/** The CLI's dead-letter shape, less created_at, which the console does not show. */
export type DeadLetterRow = Omit<DeadLetter, 'created_at'>;

export const DEAD_PAGE = 50;

/**
 * Dead-letter callbacks, oldest first (as `ens callbacks dead-letters` lists them), keyset-paged on
 * (updated_at, id) along the callbacks_dead index.
 */
export async function listDeadLetters(db: Db, opts: { clientId?: string; after: { at: string; id: string } | null }): Promise<{ rows: DeadLetterRow[]; next: string | null }> {
  const { rows } = await db.query<DeadLetterRow>(
    `SELECT id::text, delivery_id::text, client_id, url, attempts, last_error, ${isoSql('updated_at')} AS updated_at
       FROM callbacks
      WHERE status = 'dead' AND ($1::text IS NULL OR client_id = $1)
        AND ($2::timestamptz IS NULL OR (callbacks.updated_at, callbacks.id) > ($2::timestamptz, $3::uuid))
      ORDER BY callbacks.updated_at, callbacks.id LIMIT $4`,
    [opts.clientId ?? null, opts.after?.at ?? null, opts.after?.id ?? null, DEAD_PAGE + 1],
  );
  const page = rows.slice(0, DEAD_PAGE);
  const last = page[page.length - 1];
  return { rows: page, next: rows.length > DEAD_PAGE && last ? `${last.updated_at}|${last.id}` : null };
}
