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
  /** Muted now: evaluated, but nobody is notified. */
  muted: boolean;
  /** Until when (ISO), or null when muted until someone unmutes it (or not muted). */
  muted_until: string | null;
  muted_by: string | null;
  updated_at: string | null;
  updated_by: string | null;
}

export type NewAlertRule = Pick<
  AlertRule,
  | 'name'
  | 'scope'
  | 'value'
  | 'window_minutes'
  | 'min_volume'
  | 'threshold_percent'
  | 'destination_kind'
  | 'destination'
>;

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
  (SELECT ${isoSql('f.started_at')} FROM alert_firings f WHERE f.rule_id = r.id AND f.resolved_at IS NULL) AS firing_since,
  coalesce(r.muted_until > now(), false) AS muted,
  CASE WHEN r.muted_until > now() AND r.muted_until <> 'infinity' THEN ${isoSql('r.muted_until')} END AS muted_until,
  CASE WHEN r.muted_until > now() THEN r.muted_by END AS muted_by,
  ${isoSql('r.updated_at')} AS updated_at, r.updated_by`;

/** Past this many, a list says "more than": counting further costs a scan on every page view. */
const COUNT_BOUND = 10_000;

export class AlertStore {
  constructor(private readonly db: Db) {}

  /** How many rules there are, counted up to `bound` (beyond it: atLeast). */
  async ruleCount(bound = COUNT_BOUND): Promise<{ n: number; atLeast: boolean }> {
    return this.countUpTo('SELECT 1 FROM alert_rules', bound);
  }

  /** How many firings the history holds, counted up to `bound` (beyond it: atLeast). */
  async firingCount(bound = COUNT_BOUND): Promise<{ n: number; atLeast: boolean }> {
    return this.countUpTo('SELECT 1 FROM alert_firings', bound);
  }

  private async countUpTo(
    rowsSql: string,
    bound: number,
  ): Promise<{ n: number; atLeast: boolean }> {
    const { rows } = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (${rowsSql} LIMIT $1) x`,
      [bound + 1],
    );
    const n = rows[0]!.n;
    return n > bound ? { n: bound, atLeast: true } : { n, atLeast: false };
  }

  /** Rules by id, keyset-paged. */
  async rules(opts: { after?: string; limit: number }): Promise<AlertRule[]> {
    const { rows } = await this.db.query<AlertRule>(
      `SELECT ${RULE_COLUMNS} FROM alert_rules r WHERE ($1::bigint IS NULL OR r.id > $1) ORDER BY r.id LIMIT $2`,
      [opts.after ?? null, opts.limit],
    );
    return rows;
  }

  async rule(id: string): Promise<AlertRule | null> {
    const { rows } = await this.db.query<AlertRule>(
      `SELECT ${RULE_COLUMNS} FROM alert_rules r WHERE r.id = $1`,
      [id],
    );
    return rows[0] ?? null;
  }

  async create(r: NewAlertRule, by: string): Promise<AlertRule> {
    const { rows } = await this.db.query<{ id: string }>(
      `INSERT INTO alert_rules (name, scope, value, window_minutes, min_volume, threshold_percent, destination_kind, destination, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id::text`,
      [
        r.name,
        r.scope,
        r.value,
        r.window_minutes,
        r.min_volume,
        r.threshold_percent,
        r.destination_kind,
        r.destination,
        by,
      ],
    );
    return (await this.rule(rows[0]!.id))!;
  }

  /**
   * Changes a rule's settings; returns the rule as it was and as it is, or null when there is none.
   */
  async update(
    id: string,
    r: NewAlertRule,
    by: string,
  ): Promise<{ before: AlertRule; after: AlertRule } | null> {
    const before = await this.rule(id);
    if (!before) return null;
    await this.db.query(
      `UPDATE alert_rules SET name = $2, scope = $3, value = $4, window_minutes = $5, min_volume = $6, threshold_percent = $7,
              destination_kind = $8, destination = $9, updated_at = now(), updated_by = $10 WHERE id = $1`,
      [
        id,
        r.name,
        r.scope,
        r.value,
        r.window_minutes,
        r.min_volume,
        r.threshold_percent,
        r.destination_kind,
        r.destination,
        by,
      ],
    );
    return { before, after: (await this.rule(id))! };
  }

  /**
   * Mutes a rule for `minutes`, or until unmuted (null); returns the rule, or null when there is
   * none.
   */
  async mute(id: string, minutes: number | null, by: string): Promise<AlertRule | null> {
    const r = await this.db.query(
      `UPDATE alert_rules SET muted_until = CASE WHEN $2::int IS NULL THEN 'infinity'::timestamptz ELSE now() + $2::int * interval '1 minute' END, muted_by = $3 WHERE id = $1`,
      [id, minutes, by],
    );
    return r.rowCount ? this.rule(id) : null;
  }

  async unmute(id: string): Promise<AlertRule | null> {
    const r = await this.db.query(
      'UPDATE alert_rules SET muted_until = NULL, muted_by = NULL WHERE id = $1',
      [id],
    );
    return r.rowCount ? this.rule(id) : null;
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
