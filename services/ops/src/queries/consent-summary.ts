import { SUPPRESSION_REASONS, type SuppressionReasonT } from '@ens/core';
import { inTransaction, readTenantRates, type Db, type DbClient } from '@ens/core/internal';

/** Days shown in "Suppressions added per day by reason", today (UTC) included. */
export const SUPPRESSION_DAYS = 14;
/** The window of the bounce and complaint rates. */
export const RATE_DAYS = 7;
/** Tenants listed in the rates table: those nearest the mailbox providers' limits first. */
export const RATE_TENANTS_SHOWN = 20;
/**
 * Gmail's and Yahoo's bulk-sender requirements (February 2024): keep the spam complaint rate
 * under 0.3 %; past it, mail is filtered or refused.
 */
export const COMPLAINT_LIMIT_PERCENT = 0.3;

/**
 * The panels read a week of email deliveries, so they are computed at most this often per process
 * and shared by every dashboard open on it (the page itself refreshes every 30 s).
 */
export const CONSENT_PANELS_TTL_MS = 5 * 60_000;

/**
 * Each read is cancelled past this, and its panel says so; the rest of the dashboard is unaffected.
 */
const STATEMENT_TIMEOUT_MS = 10_000;

export interface SuppressionsPerDay {
  /** Day starts, YYYY-MM-DD (UTC), oldest first. */
  days: string[];
  by_reason: Record<SuppressionReasonT, number[]>;
}

export interface TenantRates {
  client_id: string;
  client_name: string | null;
  tenant: string;
  /** Email deliveries created in the window that ended sent. */
  sent: number;
  /** Of those, a bounce reported after the send (bounced_at set). */
  bounced: number;
  /**
   * Email deliveries refused at send for their recipient (an entry from the provider, hard_bounce
   * or invalid_recipient).
   */
  refused: number;
  complained: number;
  /** (bounced + refused) / (sent + refused): of what a provider was given, how much bounced. */
  bounce_percent: number | null;
  /** complained / sent. */
  complaint_percent: number | null;
  over_complaint_limit: boolean;
}

export interface ConsentSummary {
  generated_at: string;
  ttl_seconds: number;
  /** null when the read was cancelled at its time limit. */
  suppressions_per_day: SuppressionsPerDay | null;
  rates: {
    rows: TenantRates[];
    tenants: number;
    over_limit: number;
    window_days: number;
    limit_percent: number;
  } | null;
}

/*
 * Entries added per day and reason, all clients: the BRIN index on created_at (entries go in in
 * created_at order) gives the blocks of the last two weeks, whatever the size of the list. An entry
 * counts on the day it was first written; a later report about the same address updates it and is
 * not counted again.
 */
export const PER_DAY_SQL = `
SELECT to_char(date_trunc('day', created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS day, reason, count(*)::int AS n
  FROM suppressions
 WHERE created_at >= (date_trunc('day', now() AT TIME ZONE 'UTC') - ($1::int - 1) * interval '1 day') AT TIME ZONE 'UTC'
 GROUP BY 1, 2`;

function pct(n: number, of: number): number | null {
  return of === 0 ? null : Math.round((n / of) * 100_000) / 1000;
}

function dayList(today: string, n: number): string[] {
  const end = Date.parse(`${today}T00:00:00Z`);
  return Array.from({ length: n }, (_, i) =>
    new Date(end - (n - 1 - i) * 86_400_000).toISOString().slice(0, 10),
  );
}

async function timed<T>(db: Db, fn: (c: DbClient) => Promise<T>): Promise<T | null> {
  try {
    return await inTransaction(db, async (c) => {
      await c.query(`SET LOCAL statement_timeout = ${STATEMENT_TIMEOUT_MS}`);
      return fn(c);
    });
  } catch (e) {
    if ((e as { code?: string }).code === '57014') return null;
    throw e;
  }
}

async function compute(db: Db): Promise<ConsentSummary> {
  const [perDay, rates, clock] = await Promise.all([
    timed(db, (c) =>
      c.query<{ day: string; reason: SuppressionReasonT; n: number }>(PER_DAY_SQL, [
        SUPPRESSION_DAYS,
      ]),
    ),
    timed(db, (c) =>
      readTenantRates(c, {
        days: RATE_DAYS,
        limitPercent: COMPLAINT_LIMIT_PERCENT,
        shown: RATE_TENANTS_SHOWN,
      }),
    ),
    db.query<{ today: string }>(`SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS today`),
  ]);
  let perDayOut: SuppressionsPerDay | null = null;
  if (perDay) {
    const days = dayList(clock.rows[0]!.today, SUPPRESSION_DAYS);
    const index = new Map(days.map((d, i) => [d, i]));
    const by_reason = Object.fromEntries(
      SUPPRESSION_REASONS.map((r) => [r, days.map(() => 0)]),
    ) as Record<SuppressionReasonT, number[]>;
    for (const r of perDay.rows) {
      const i = index.get(r.day);
      if (i !== undefined && by_reason[r.reason]) by_reason[r.reason][i] = r.n;
    }
    perDayOut = { days, by_reason };
  }
  let ratesOut: ConsentSummary['rates'] = null;
  if (rates) {
    const ids = [...new Set(rates.map((r) => r.client_id))];
    const names =
      ids.length === 0
        ? new Map<string, string>()
        : new Map(
            (
              await db.query<{ id: string; name: string }>(
                'SELECT id, name FROM clients WHERE id = ANY($1::text[])',
                [ids],
              )
            ).rows.map((r) => [r.id, r.name]),
          );
    ratesOut = {
      rows: rates.map(({ tenants: _t, over_limit: _o, ...r }) => {
        const complaint = pct(r.complained, r.sent);
        return {
          ...r,
          client_name: names.get(r.client_id) ?? null,
          bounce_percent: pct(r.bounced + r.refused, r.sent + r.refused),
          complaint_percent: complaint,
          over_complaint_limit:
            r.complained > 0 &&
            (complaint === null || r.complained * 100 > r.sent * COMPLAINT_LIMIT_PERCENT),
        };
      }),
      tenants: rates[0]?.tenants ?? 0,
      over_limit: rates[0]?.over_limit ?? 0,
      window_days: RATE_DAYS,
      limit_percent: COMPLAINT_LIMIT_PERCENT,
    };
  }
  return {
    generated_at: new Date().toISOString(),
    ttl_seconds: CONSENT_PANELS_TTL_MS / 1000,
    suppressions_per_day: perDayOut,
    rates: ratesOut,
  };
}

const cache = new WeakMap<Db, { at: number; value: Promise<ConsentSummary> }>();

/**
 * The dashboard's consent panels, computed at most every CONSENT_PANELS_TTL_MS per process and
 * database.
 */
export function loadConsentSummary(db: Db, now = Date.now()): Promise<ConsentSummary> {
  const hit = cache.get(db);
  if (hit && now - hit.at < CONSENT_PANELS_TTL_MS) return hit.value;
  const value = compute(db);
  cache.set(db, { at: now, value });
  // A failed read is not kept: the next dashboard view tries again.
  value.catch(() => {
    if (cache.get(db)?.value === value) cache.delete(db);
  });
  return value;
}
