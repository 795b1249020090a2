import { isoSql, type Db } from '../../db/pool.ts';
import { callbackUrlSql, type DeadLetter } from '../callbacks.ts';

/* The console's read models of dead letters (callbacks that ran out of attempts), in groups. */

/** The CLI's dead-letter shape, less created_at, which the console does not show. */
/**
 * A dead letter with its delivery's recipient, channel and reference, so a row says whose it is.
 */
export type DeadLetterRow = Omit<DeadLetter, 'created_at'> & {
  recipient: string | null;
  channel: string | null;
  reference: string | null;
};

export const DEAD_PAGE = 50;
export const GROUPS_SHOWN = 100;

/**
 * Dead letters of one client, URL and last error: the same fault (a receiver down, a handler
 * throwing the same error), replayed together once it is fixed. `key` names the group in links and
 * forms, so a replay never needs a client id, URL or error typed or carried in a form.
 */
export interface DeadLetterGroup {
  key: string;
  client_id: string;
  url: string;
  last_error: string | null;
  count: number;
  first_died: string;
  last_died: string;
  max_attempts: number;
}

/** The group key: an md5 of the three values, computed the same way wherever a group is named. */
const GROUP_KEY = `md5(client_id || E'\\n' || url || E'\\n' || coalesce(last_error, E'\\x01'))`;
/** The same key where the deliveries are joined (they have a client_id and a last_error too). */
const CALLBACKS_GROUP_KEY = GROUP_KEY.replace(/\b(client_id|url|last_error)\b/g, 'callbacks.$1');
/**
 * The dead letters, with the URL each was posted to (its handoff's since migration 021), as
 * `callbacks`: a simple subquery, which PostgreSQL pulls up, so the filters on it still read
 * callbacks_dead.
 */
const DEAD = `(SELECT c.id, c.delivery_id, c.client_id, ${callbackUrlSql('c')} AS url, c.attempts, c.last_error, c.updated_at
   FROM callbacks c WHERE c.status = 'dead') callbacks`;

/**
 * Dead letters grouped, largest groups first, optionally of one client, with how many dead letters
 * and how many groups there are in all (every group is formed before the largest are taken, so
 * both totals are exact at no extra read). Reads only dead rows, through the partial index
 * callbacks_dead (client_id, updated_at) WHERE status = 'dead'.
 */
export async function listDeadLetterGroups(
  db: Db,
  opts: { clientId?: string },
): Promise<{ groups: DeadLetterGroup[]; more: boolean; total: number; groupsTotal: number }> {
  const { rows } = await db.query<DeadLetterGroup & { total: number; groups_total: number }>(
    `SELECT ${GROUP_KEY} AS key, client_id, url, last_error, count(*)::int AS count, max(attempts)::int AS max_attempts,
            ${isoSql('min(updated_at)')} AS first_died, ${isoSql('max(updated_at)')} AS last_died,
            (sum(count(*)) OVER ())::int AS total, (count(*) OVER ())::int AS groups_total
       FROM ${DEAD} WHERE $1::text IS NULL OR client_id = $1
      GROUP BY client_id, url, last_error
      ORDER BY count(*) DESC, max(updated_at) DESC LIMIT $2`,
    [opts.clientId ?? null, GROUPS_SHOWN + 1],
  );
  return {
    groups: rows.slice(0, GROUPS_SHOWN).map(({ total: _t, groups_total: _g, ...g }) => g),
    more: rows.length > GROUPS_SHOWN,
    total: rows[0]?.total ?? 0,
    groupsTotal: rows[0]?.groups_total ?? 0,
  };
}

/** The group named by key, or null when it has no dead letter left. */
export async function findDeadLetterGroup(db: Db, key: string): Promise<DeadLetterGroup | null> {
  const { rows } = await db.query<DeadLetterGroup>(
    `SELECT ${GROUP_KEY} AS key, client_id, url, last_error, count(*)::int AS count, max(attempts)::int AS max_attempts,
            ${isoSql('min(updated_at)')} AS first_died, ${isoSql('max(updated_at)')} AS last_died
       FROM ${DEAD} WHERE ${GROUP_KEY} = $1
      GROUP BY client_id, url, last_error`,
    [key],
  );
  return rows[0] ?? null;
}

/**
 * The ids of a group's dead letters, to replay them (CallbackStore.replay checks each is still
 * dead).
 */
export async function deadLetterIdsOfGroup(db: Db, key: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id::text FROM ${DEAD} WHERE ${GROUP_KEY} = $1`,
    [key],
  );
  return rows.map((r) => r.id);
}

/**
 * One group's dead letters, oldest first (as `ens callbacks dead-letters` lists them), keyset-paged
 * on (updated_at, id).
 */
export async function listDeadLetters(
  db: Db,
  opts: { group: string; after: { at: string; id: string } | null },
): Promise<{ rows: DeadLetterRow[]; next: string | null }> {
  const { rows } = await db.query<DeadLetterRow>(
    `SELECT callbacks.id::text, callbacks.delivery_id::text, callbacks.client_id, callbacks.url,
            callbacks.attempts, callbacks.last_error, d.recipient, d.channel, d.reference,
            ${isoSql('callbacks.updated_at')} AS updated_at
       FROM ${DEAD} LEFT JOIN deliveries d ON d.id = callbacks.delivery_id
      WHERE ${CALLBACKS_GROUP_KEY} = $1
        AND ($2::timestamptz IS NULL OR (callbacks.updated_at, callbacks.id) > ($2::timestamptz, $3::uuid))
      ORDER BY callbacks.updated_at, callbacks.id LIMIT $4`,
    [opts.group, opts.after?.at ?? null, opts.after?.id ?? null, DEAD_PAGE + 1],
  );
  const page = rows.slice(0, DEAD_PAGE);
  const last = page[page.length - 1];
  return {
    rows: page,
    next: rows.length > DEAD_PAGE && last ? `${last.updated_at}|${last.id}` : null,
  };
}
