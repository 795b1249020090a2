import { randomBytes } from 'node:crypto';
import type { Db } from '@ens/core/internal';

const ID = /^[A-Za-z0-9_-]{22}$/;

/**
 * A fresh id for a form that must be acted on once (create client, rotate, new callback secret).
 */
export function newSubmissionId(): string {
  return randomBytes(16).toString('base64url');
}

/**
 * Claims a form submission. A browser reload of the page that answered a POST sends the same form
 * again, with the same id: the second claim is refused and returns what the first one made, so the
 * reload neither creates a second client (or rotates again) nor shows a secret a second time.
 * A form without an id (a script posting directly) is acted on.
 */
export async function claimSubmission(
  db: Db,
  id: string,
): Promise<{ fresh: true } | { fresh: false; result: string | null }> {
  if (!ID.test(id)) return { fresh: true };
  const ins = await db.query(
    'INSERT INTO ops_form_submissions (id) VALUES ($1) ON CONFLICT (id) DO NOTHING',
    [id],
  );
  if (ins.rowCount) {
    if (Math.random() < 0.02)
      await db.query(`DELETE FROM ops_form_submissions WHERE at < now() - interval '1 day'`);
    return { fresh: true };
  }
  const { rows } = await db.query<{ result: string | null }>(
    'SELECT result FROM ops_form_submissions WHERE id = $1',
    [id],
  );
  return { fresh: false, result: rows[0]?.result ?? null };
}

export async function recordSubmission(db: Db, id: string, result: string): Promise<void> {
  if (!ID.test(id)) return;
  await db.query('UPDATE ops_form_submissions SET result = $2 WHERE id = $1', [id, result]);
}
