import { inTransaction, type Db } from '@ens/core/internal';

/** How far back a new or edited rule's event type is looked for: a rule's longest window. */
const LOOK_BACK = '1 day';
const CHECK_TIMEOUT_MS = 2000;

export type RuleMatch = { matches: true } | { matches: false; warning: string } | { matches: 'unknown'; warning: string };

/**
 * Whether a rule watches something that exists, checked when it is saved, so a misspelt event type
 * or tenant is flagged at once instead of staying silent forever. A tenant must be provisioned for
 * some client (the tenants table). An event type must appear on a handoff of the last day: a
 * range of the handoffs' primary key (UUIDv7, ens_uuid7_floor), stopped at the first match and
 * given two seconds at most.
 */
export async function checkRuleMatches(db: Db, scope: 'event_type' | 'tenant', value: string): Promise<RuleMatch> {
  try {
    const found = await inTransaction(db, async (c) => {
      await c.query(`SET LOCAL statement_timeout = ${CHECK_TIMEOUT_MS}`);
      const sql =
        scope === 'tenant'
          ? 'SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1) AS found'
          : `SELECT EXISTS (SELECT 1 FROM handoffs WHERE id >= ens_uuid7_floor(now() - interval '${LOOK_BACK}') AND created_at >= now() - interval '${LOOK_BACK}' AND event_type = $1) AS found`;
      return (await c.query<{ found: boolean }>(sql, [value])).rows[0]!.found;
    });
    if (found) return { matches: true };
    return {
      matches: false,
      warning:
        scope === 'tenant'
          ? `no client has a tenant "${value}", so this rule matches nothing: check the spelling`
          : `no delivery of the last 24 hours has the event type "${value}", so this rule matches nothing yet: check the spelling`,
    };
  } catch (e) {
    if ((e as { code?: string }).code !== '57014') throw e;
    return { matches: 'unknown', warning: `ENS could not check in time whether "${value}" matches any delivery` };
  }
}
