import type { Runtime } from '@ens/core';
import { inTransaction, JOB_EVERY_MS, measureAlertRules, startJobs } from '@ens/core/internal';
import { postAlertWebhook, sendAlertEmail, type AlertNotice } from './notify.ts';

/** A destination that keeps failing is tried this many times per firing, one try per evaluation. */
const MAX_NOTIFY_ATTEMPTS = 5;

export interface EvaluationResult {
  evaluated: number;
  fired: string[];
  resolved: string[];
  notified: string[];
}

/**
 * True when the rule's condition holds: enough volume, and the failed share at or over the
 * threshold.
 */
export function isFiring(m: {
  total: number;
  failed: number;
  min_volume: number;
  threshold: number;
}): boolean {
  return m.total >= m.min_volume && m.total > 0 && (m.failed * 100) / m.total >= m.threshold;
}

/**
 * One evaluation: opens a firing for each rule whose condition holds, refreshes the numbers of
 * open ones, resolves those that no longer hold, then notifies new firings. Evaluators in other
 * processes skip the round while one holds the lock; the unique open-firing index and the
 * notification claim keep them from doubling anything even so.
 */
export async function evaluateAlerts(rt: Runtime): Promise<EvaluationResult> {
  const result: EvaluationResult = { evaluated: 0, fired: [], resolved: [], notified: [] };
  await inTransaction(rt.db, async (c) => {
    const lock = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(7466004) AS ok');
    if (!lock.rows[0]!.ok) return;
    const rows = await measureAlertRules(c);
    for (const r of rows) {
      result.evaluated++;
      const rate = r.total > 0 ? Math.round((r.failed * 10000) / r.total) / 100 : 0;
      if (isFiring(r)) {
        if (r.open_firing) {
          await c.query(
            'UPDATE alert_firings SET total = $2, failed = $3, rate_percent = $4 WHERE id = $1',
            [r.open_firing, r.total, r.failed, rate],
          );
        } else {
          const ins = await c.query<{ id: string }>(
            `INSERT INTO alert_firings (rule_id, total, failed, rate_percent) VALUES ($1, $2, $3, $4)
             ON CONFLICT (rule_id) WHERE resolved_at IS NULL DO NOTHING RETURNING id::text`,
            [r.id, r.total, r.failed, rate],
          );
          if (ins.rows[0]) result.fired.push(ins.rows[0].id);
        }
      } else if (r.open_firing) {
        await c.query(
          'UPDATE alert_firings SET resolved_at = now(), total = $2, failed = $3, rate_percent ' +
            '= $4 WHERE id = $1',
          [r.open_firing, r.total, r.failed, rate],
        );
        result.resolved.push(r.open_firing);
      }
    }
  });
  result.notified = await notifyPending(rt);
  return result;
}

/**
 * Notifies each open firing not yet notified; a claim per try keeps two evaluators from both
 * sending. A muted rule's firings wait: if one is still open when the mute ends, it is notified
 * then.
 */
async function notifyPending(rt: Runtime): Promise<string[]> {
  const { rows } = await rt.db.query(
    `SELECT f.id::text AS firing_id, f.notify_attempts, f.total, f.failed, f.rate_percent::float8 AS rate_percent,
            to_char(f.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS started_at,
            r.id::text AS rule_id, r.name, r.scope, r.value, r.window_minutes, r.min_volume, r.threshold_percent::float8 AS threshold_percent,
            r.destination_kind, r.destination
       FROM alert_firings f JOIN alert_rules r ON r.id = f.rule_id
      WHERE f.resolved_at IS NULL AND f.notified_at IS NULL AND f.notify_attempts < $1
        AND (r.muted_until IS NULL OR r.muted_until <= now())`,
    [MAX_NOTIFY_ATTEMPTS],
  );
  const done: string[] = [];
  for (const f of rows) {
    const claim = await rt.db.query(
      'UPDATE alert_firings SET notify_attempts = notify_attempts + 1 WHERE id = $1 AND ' +
        'notified_at IS NULL AND notify_attempts = $2',
      [f.firing_id, f.notify_attempts],
    );
    if (!claim.rowCount) continue;
    const notice: AlertNotice = {
      firingId: f.firing_id,
      rule: {
        id: f.rule_id,
        name: f.name,
        scope: f.scope,
        value: f.value,
        window_minutes: f.window_minutes,
        min_volume: f.min_volume,
        threshold_percent: f.threshold_percent,
      },
      startedAt: f.started_at,
      total: f.total,
      failed: f.failed,
      ratePercent: f.rate_percent,
      consoleUrl: `${rt.config.publicUrl}/ops/alerts`,
    };
    try {
      if (f.destination_kind === 'email') await sendAlertEmail(rt, notice, f.destination);
      else await postAlertWebhook(f.destination, notice, rt.config.allowPrivateCallbacks);
      await rt.db.query(
        'UPDATE alert_firings SET notified_at = now(), notify_error = NULL WHERE id = $1',
        [f.firing_id],
      );
      done.push(f.firing_id);
    } catch (err) {
      rt.logger.warn({ err, firing: f.firing_id, rule: f.rule_id }, 'alert notification failed');
      await rt.db.query('UPDATE alert_firings SET notify_error = $2 WHERE id = $1', [
        f.firing_id,
        String((err as Error).message ?? err).slice(0, 500),
      ]);
    }
  }
  return done;
}

/**
 * Evaluates the alert rules every 30 s until stopped: the alert-evaluation job (declared with its
 * interval in core's jobs/catalogue.ts), run by the jobs scheduler. A round slower than the
 * interval is not overlapped by the next one.
 */
export function startAlertEvaluator(
  rt: Runtime,
  opts: { intervalMs?: number } = {},
): { stop(): Promise<void>; runOnce(): Promise<EvaluationResult> } {
  const jobs = startJobs(
    [
      {
        name: 'alert-evaluation',
        everyMs: opts.intervalMs ?? JOB_EVERY_MS['alert-evaluation'],
        failureMessage: 'alert evaluation failed',
        firstPass: 'after-interval',
        oneAtATime: true,
        run: async () => void (await evaluateAlerts(rt)),
      },
    ],
    rt.logger,
  );
  return {
    stop: () => jobs.stop(),
    runOnce: () => evaluateAlerts(rt),
  };
}
