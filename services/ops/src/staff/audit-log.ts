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
    await via.query('INSERT INTO audit_log (actor, staff_id, action, target, detail) VALUES ($1, $2, $3, $4, $5)', [
      e.actor,
      e.staffId ?? null,
      e.action,
      e.target ?? null,
      JSON.stringify(e.detail ?? {}),
    ]);
  }

  /** Newest first; `before` is the last id of the previous page (keyset on the primary key). */
  async page(opts: { before?: string; limit: number }): Promise<AuditRow[]> {
    const { rows } = await this.db.query<AuditRow>(
      `SELECT id::text, ${isoSql('at')} AS at, actor, action, target, detail FROM audit_log
        WHERE ($1::bigint IS NULL OR audit_log.id < $1) ORDER BY audit_log.id DESC LIMIT $2`,
      [opts.before ?? null, opts.limit],
    );
    return rows;
  }
}
