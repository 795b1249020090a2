import type { Db } from '../../db/pool.ts';

/* The alert rules' read models of the delivery record: each rule's numbers, and the check the rules'
 * event types get (does any recent handoff have them). */

/*
 * Each rule's numbers over its window: deliveries of its event type (or tenant) created in the
 * last window_minutes that ended (sent or failed), and the failed ones. The id range (UUIDv7) keeps
 * it to the end of the primary key.
 */
const MEASURE_SQL = `
SELECT r.id::text, r.min_volume, r.threshold_percent::float8 AS threshold, x.total, x.failed,
       (SELECT f.id::text FROM alert_firings f WHERE f.rule_id = r.id AND f.resolved_at IS NULL) AS open_firing
  FROM alert_rules r
  CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE d.status IN ('sent', 'failed'))::int AS total, count(*) FILTER (WHERE d.status = 'failed')::int AS failed
      FROM deliveries d
     WHERE d.id >= ens_uuid7_floor(now() - r.window_minutes * interval '1 minute')
       AND d.created_at >= now() - r.window_minutes * interval '1 minute'
       AND CASE WHEN r.scope = 'event_type' THEN d.event_type = r.value ELSE d.tenant = r.value END) x`;

/** One rule's numbers over its window, and its open firing if it has one. */
export interface RuleMeasure {
  id: string;
  min_volume: number;
  threshold: number;
  total: number;
  failed: number;
  open_firing: string | null;
}

/** Every alert rule's numbers now (run inside the evaluator's transaction). */
export async function measureAlertRules(db: Pick<Db, 'query'>): Promise<RuleMeasure[]> {
  return (await db.query<RuleMeasure>(MEASURE_SQL)).rows;
}

/**
 * Which of `eventTypes` a handoff of the last `lookBack` (an SQL interval, such as '1 day') has,
 * in one statement whatever their number, so a page of alert rules costs one pass over the range,
 * not one per rule. The walk goes down the handoffs' primary key (UUIDv7, ens_uuid7_floor) from
 * the newest: each step resumes the index scan where the last one stopped and looks only for the
 * event types not yet found, so it stops as soon as all are found and reads the range at most once
 * (when one is missing). A DISTINCT over the range would read all of it every time.
 */
export async function eventTypesSeen(
  db: Pick<Db, 'query'>,
  eventTypes: readonly string[],
  lookBack: '1 day',
): Promise<Set<string>> {
  const wanted = [...new Set(eventTypes)];
  if (wanted.length === 0) return new Set();
  const { rows } = await db.query<{ found: string }>(
    `WITH RECURSIVE walk (id, found, missing) AS (
       SELECT 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid, NULL::text, $1::text[]
       UNION ALL
       SELECT h.id, h.event_type, array_remove(w.missing, h.event_type)
         FROM walk w
        CROSS JOIN LATERAL (
          SELECT handoffs.id, handoffs.event_type FROM handoffs
           WHERE handoffs.id >= ens_uuid7_floor(now() - interval '${lookBack}') AND handoffs.id < w.id
             AND handoffs.created_at >= now() - interval '${lookBack}' AND handoffs.event_type = ANY (w.missing)
           ORDER BY handoffs.id DESC LIMIT 1) h
        WHERE cardinality(w.missing) > 0)
     SELECT found FROM walk WHERE found IS NOT NULL`,
    [wanted],
  );
  return new Set(rows.map((r) => r.found));
}
