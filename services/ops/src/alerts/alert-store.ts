import { isoSql, type Db } from '@ens/core/internal';

export interface AlertRule {
  id: string;
  name: string;
  scope: 'event_type' | 'tenant';
  value: string;
  window_minutes: number;
  min_volume: number;
  threshold_percent: number;
  destination_kind: 'email' | 'webhook';
  destination: string;
  created_by: string;
  created_at: string;
  /** The open firing, when the rule fires now. */
  firing_since: string | null;
}

export type NewAlertRule = Pick<AlertRule, 'name' | 'scope' | 'value' | 'window_minutes' | 'min_volume' | 'threshold_percent' | 'destination_kind' | 'destination'>;

export interface FiringRow {
  id: string;
  rule_id: string;
  rule_name: string;
  started_at: string;
  resolved_at: string | null;
  total: number;
  failed: number;
  rate_percent: number;
  notified_at: string | null;
  notify_error: string | null;
}

const RULE_COLUMNS = `r.id::text, r.name, r.scope, r.value, r.window_minutes, r.min_volume, r.threshold_percent::float8 AS threshold_percent,
  r.destination_kind, r.destination, r.created_by, ${isoSql('r.created_at')} AS created_at,
  (SELECT ${isoSql('f.started_at')} FROM alert_firings f WHERE f.rule_id = r.id AND f.resolved_at IS NULL) AS firing_since`;

export class AlertStore {
  constructor(private readonly db: Db) {}

  /** Rules by id, keyset-paged. */
  async rules(opts: { after?: string; limit: number }): Promise<AlertRule[]> {
    const { rows } = await this.db.query<AlertRule>(
      `SELECT ${RULE_COLUMNS} FROM alert_rules r WHERE ($1::bigint IS NULL OR r.id > $1) ORDER BY r.id LIMIT $2`,
      [opts.after ?? null, opts.limit],
    );
    return rows;
  }

  async rule(id: string): Promise<AlertRule | null> {
    const { rows } = await this.db.query<AlertRule>(`SELECT ${RULE_COLUMNS} FROM alert_rules r WHERE r.id = $1`, [id]);
    return rows[0] ?? null;
  }

  async create(r: NewAlertRule, by: string): Promise<AlertRule> {
    const { rows } = await this.db.query<{ id: string }>(
      `INSERT INTO alert_rules (name, scope, value, window_minutes, min_volume, threshold_percent, destination_kind, destination, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id::text`,
      [r.name, r.scope, r.value, r.window_minutes, r.min_volume, r.threshold_percent, r.destination_kind, r.destination, by],
    );
    return (await this.rule(rows[0]!.id))!;
  }

  async delete(id: string): Promise<AlertRule | null> {
    const rule = await this.rule(id);
    if (!rule) return null;
    await this.db.query('DELETE FROM alert_rules WHERE id = $1', [id]);
    return rule;
  }

  /** Firings newest first, keyset-paged on id. */
  async firings(opts: { before?: string; limit: number }): Promise<FiringRow[]> {
    const { rows } = await this.db.query<FiringRow>(
      `SELECT f.id::text, f.rule_id::text, r.name AS rule_name, ${isoSql('f.started_at')} AS started_at, ${isoSql('f.resolved_at')} AS resolved_at,
              f.total, f.failed, f.rate_percent::float8 AS rate_percent, ${isoSql('f.notified_at')} AS notified_at, f.notify_error
         FROM alert_firings f JOIN alert_rules r ON r.id = f.rule_id
        WHERE ($1::bigint IS NULL OR f.id < $1) ORDER BY f.id DESC LIMIT $2`,
      [opts.before ?? null, opts.limit],
    );
    return rows;
  }
}
