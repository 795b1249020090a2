/**
 * An attempt's row is written once, when the attempt ends (migration 017); until then the attempt
 * is the delivery row itself (pending, leased, its claim's provider and time). This is the INSERT
 * that records attempts which ended without an outcome, as `lost`: `rows` is a query of
 * (delivery id, attempt number, provider, started at, error). An attempt already ended is left as
 * it is: a transition that read the row just before its outcome committed may think it still open.
 * A row a process of a release before 017 opened at its claim (during a rolling update) is ended.
 */
export function lostAttemptsSql(rows: string): string {
  return `INSERT INTO attempts AS a (delivery_id, number, provider, started_at, finished_at, outcome, error)
  SELECT l.id, l.number, coalesce(l.provider, 'unknown'), coalesce(l.started_at, now()), now(), 'lost', l.error
    FROM (${rows}) AS l(id, number, provider, started_at, error)
  ON CONFLICT (delivery_id, number) DO UPDATE SET outcome = 'lost', finished_at = excluded.finished_at, error = excluded.error
   WHERE a.outcome IS NULL`;
}

/**
 * An attempt in flight, as a condition on its delivery row aliased `d`: the claim still open
 * (pending, its lease set, run out or not, until an outcome or a later transition ends it).
 */
export function attemptInFlightSql(d: string): string {
  return `${d}.status = 'pending' AND ${d}.lease_until IS NOT NULL`;
}
