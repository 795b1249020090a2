import { eventTypesSeen, inTransaction, type Db } from '@ens/core/internal';

/** How far back a rule's event type is looked for: a rule's longest window. */
const LOOK_BACK = '1 day' as const;
const CHECK_TIMEOUT_MS = 2000;

export type RuleMatch =
  | { matches: true }
  | { matches: false; warning: string }
  | { matches: 'unknown'; warning: string };

/** What a rule watches: an event type or a tenant, by its value. */
export interface WatchedValue {
  scope: 'event_type' | 'tenant';
  value: string;
}

/**
 * Whether rules watch something that exists, so a misspelt event type or tenant is flagged (when a
 * rule is saved, and as "no data" on the alerts page) instead of staying silent forever. A tenant
 * must be provisioned for some client (the tenants table). An event type must appear on a handoff
 * of the last day (core's eventTypesSeen). However many rules are asked about, this is two
 * statements at most, one per scope, each given two seconds; a scope that runs out of time is
 * 'unknown' for its rules. The answers are in the order of `rules`.
 */
export async function checkRulesMatch(
  db: Db,
  rules: readonly WatchedValue[],
): Promise<RuleMatch[]> {
  const values = (scope: WatchedValue['scope']) =>
    rules.filter((r) => r.scope === scope).map((r) => r.value);
  const [eventTypes, tenants] = await Promise.all([
    found(db, values('event_type'), (c, v) => eventTypesSeen(c, v, LOOK_BACK)),
    found(db, values('tenant'), async (c, v) => {
      const sql = 'SELECT DISTINCT id FROM tenants WHERE id = ANY ($1::text[])';
      return new Set((await c.query<{ id: string }>(sql, [v])).rows.map((r) => r.id));
    }),
  ]);
  return rules.map(({ scope, value }) => {
    const seen = scope === 'event_type' ? eventTypes : tenants;
    if (seen === 'timeout')
      return {
        matches: 'unknown',
        warning: `ENS could not check in time whether "${value}" matches any delivery`,
      };
    if (seen.has(value)) return { matches: true };
    return {
      matches: false,
      warning:
        scope === 'tenant'
          ? `no client has a tenant "${value}", so this rule matches nothing: check the spelling`
          : `no delivery of the last 24 hours has the event type "${value}", so this rule matches nothing yet: check the spelling`,
    };
  });
}

/** Whether one rule watches something that exists (checkRulesMatch for one rule). */
export async function checkRuleMatches(
  db: Db,
  scope: WatchedValue['scope'],
  value: string,
): Promise<RuleMatch> {
  return (await checkRulesMatch(db, [{ scope, value }]))[0]!;
}

/** The values of `values` that `lookUp` finds, within the check's time limit. */
async function found(
  db: Db,
  values: string[],
  lookUp: (c: Pick<Db, 'query'>, values: string[]) => Promise<Set<string>>,
): Promise<Set<string> | 'timeout'> {
  if (values.length === 0) return new Set();
  try {
    return await inTransaction(db, async (c) => {
      await c.query(`SET LOCAL statement_timeout = ${CHECK_TIMEOUT_MS}`);
      return lookUp(c, values);
    });
  } catch (e) {
    if ((e as { code?: string }).code !== '57014') throw e;
    return 'timeout';
  }
}
