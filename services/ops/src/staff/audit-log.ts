import { isoSql, type Db } from '@ens/core/internal';

export interface AuditEntry {
  /** Staff email (or subject when the provider gave no email), or 'cli' for `ens staff …`. */
  actor: string;
  staffId?: string | null;
  /** Dotted verb, such as client.create or dead_letter.replay. */
  action: string;
  target?: string | null;
  detail?: Record<string, unknown>;
}

export interface AuditRow {
  id: string;
  at: string;
  actor: string;
  action: string;
  target: string | null;
  detail: Record<string, unknown>;
}

type Queryable = Pick<Db, 'query'>;

/** The console's audit log: every staff action, written beside the action itself. */
export class AuditLog {
  constructor(private readonly db: Queryable) {}

  async write(e: AuditEntry, via: Queryable = this.db): Promise<void> {
    await via.query(
      'INSERT INTO audit_log (actor, staff_id, action, target, detail) VALUES ($1, $2, $3, $4, $5)',
      [e.actor, e.staffId ?? null, e.action, e.target ?? null, JSON.stringify(e.detail ?? {})],
    );
  }

  /**
   * Newest first, filtered; `before` is the last id of the previous page (keyset on the primary
   * key). `actor` and `action` match exactly; `since` (inclusive) and `until` (exclusive) are ISO
   * instants already checked (parseTimestamp).
   */
  async page(opts: AuditFilter & { before?: string; limit: number }): Promise<AuditRow[]> {
    const { rows } = await this.db.query<AuditRow>(
      `SELECT id::text, ${isoSql('at')} AS at, actor, action, target, detail FROM audit_log
        WHERE ($1::bigint IS NULL OR audit_log.id < $1) AND ${FILTER_SQL}
        ORDER BY audit_log.id DESC LIMIT $2`,
      [opts.before ?? null, opts.limit, ...filterValues(opts)],
    );
    return rows;
  }

  /** How many entries the filter matches, counted up to `bound` (beyond it: atLeast). */
  async count(f: AuditFilter, bound = 10_000): Promise<{ n: number; atLeast: boolean }> {
    const { rows } = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM audit_log
        WHERE $1::int IS NOT NULL AND ${FILTER_SQL} LIMIT $2) x`,
      [0, bound + 1, ...filterValues(f)],
    );
    const n = rows[0]!.n;
    return n > bound ? { n: bound, atLeast: true } : { n, atLeast: false };
  }

  /** The actions written so far, for the filter's choices. */
  async actions(): Promise<string[]> {
    const { rows } = await this.db.query<{ action: string }>(
      'SELECT DISTINCT action FROM audit_log ORDER BY action',
    );
    return rows.map((r) => r.action);
  }
}

export interface AuditFilter {
  actor?: string;
  action?: string;
  since?: string;
  until?: string;
}

/** The filter's conditions, on parameters $3 to $6 (the first two are each query's own). */
const FILTER_SQL = `($3::text IS NULL OR actor = $3) AND ($4::text IS NULL OR action = $4)
  AND ($5::timestamptz IS NULL OR at >= $5) AND ($6::timestamptz IS NULL OR at < $6)`;

const filterValues = (f: AuditFilter) => [
  f.actor ?? null,
  f.action ?? null,
  f.since ?? null,
  f.until ?? null,
];
