import { isoSql, usageTodayOf, type Db } from '@ens/core/internal';

export interface ClientListRow {
  id: string;
  name: string;
  disabled: boolean;
  has_callback_secret: boolean;
  rate_limit: number | null;
  daily_quota: Record<string, number>;
  created_at: string;
  /** Deliveries created today (UTC) per channel. */
  usage: Record<string, number>;
}

export const CLIENT_PAGE = 50;

/**
 * Clients in creation order, keyset-paged on (created_at, id), with today's usage counted for the
 * page's clients in one statement (core's usageTodayOf).
 */
export async function listClients(
  db: Db,
  after: { at: string; id: string } | null,
): Promise<{ rows: ClientListRow[]; next: string | null; total: number }> {
  const [{ rows }, counted] = await Promise.all([
    db.query(
      `SELECT id, name, disabled_at IS NOT NULL AS disabled, callback_secret_enc IS NOT NULL AS has_callback_secret, rate_limit, daily_quota,
            ${isoSql('created_at')} AS created_at
       FROM clients WHERE deleted_at IS NULL AND ($1::timestamptz IS NULL OR (clients.created_at, clients.id) > ($1::timestamptz, $2::text))
      ORDER BY clients.created_at, clients.id LIMIT $3`,
      [after?.at ?? null, after?.id ?? null, CLIENT_PAGE + 1],
    ),
    db.query<{ n: number }>('SELECT count(*)::int AS n FROM clients WHERE deleted_at IS NULL'),
  ]);
  const page = rows.slice(0, CLIENT_PAGE) as ClientListRow[];
  const usage = await usageTodayOf(
    db,
    page.map((r) => r.id),
  );
  for (const r of page) r.usage = usage.get(r.id) ?? {};
  const last = page[page.length - 1];
  return {
    rows: page,
    next: rows.length > CLIENT_PAGE && last ? `${last.created_at}|${last.id}` : null,
    total: counted.rows[0]!.n,
  };
}

/** Client names by id, for the page's rows (one primary-key lookup per distinct id). */
export async function clientNames(
  db: Pick<Db, 'query'>,
  ids: Iterable<string>,
): Promise<Map<string, string>> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; name: string }>(
    'SELECT id, name FROM clients WHERE id = ANY($1::text[])',
    [unique],
  );
  return new Map(rows.map((r) => [r.id, r.name]));
}
