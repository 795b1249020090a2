import { randomBytes } from 'node:crypto';
import type { Db } from '../db/pool.ts';
import { isoSql } from '../db/pool.ts';
import { hashSecret } from '../secrets/password-hash.ts';
import type { SecretBox } from '../secrets/secret-box.ts';
import type { Channel } from '../schemas/channel.ts';

/** Channel on which API processes hear that a client changed (disabled, limits, secrets). */
export const CLIENT_CHANGES_CHANNEL = 'ens_client_changes';

export interface ClientRow {
  id: string;
  name: string;
  secretHash: string;
  callbackSecretEnc: string | null;
  disabled: boolean;
  rateLimit: number | null;
  dailyQuota: Partial<Record<Channel, number>>;
  createdAt: string;
}

export interface IssuedClient {
  client_id: string;
  client_secret: string;
  callback_secret?: string;
}

function token(prefix: string, bytes: number): string {
  return `${prefix}${randomBytes(bytes).toString('base64url')}`;
}

/**
 * Callback secrets use the Standard Webhooks form `whsec_<base64>`, so a receiver can hand the
 * same string to a Standard Webhooks library and to an X-ENS-Signature check.
 */
function callbackSecretValue(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

const SELECT = `SELECT id, name, secret_hash, callback_secret_enc, disabled_at IS NOT NULL AS disabled, rate_limit,
  daily_quota, ${isoSql('created_at')} AS created_at FROM clients`;

/** A client not deleted: the only kind a command or the console can see or change. */
const LIVE = 'deleted_at IS NULL';

function toRow(r: Record<string, unknown>): ClientRow {
  return {
    id: r.id as string,
    name: r.name as string,
    secretHash: r.secret_hash as string,
    callbackSecretEnc: (r.callback_secret_enc as string | null) ?? null,
    disabled: r.disabled as boolean,
    rateLimit: (r.rate_limit as number | null) ?? null,
    dailyQuota: r.daily_quota as ClientRow['dailyQuota'],
    createdAt: r.created_at as string,
  };
}

async function notify(db: Db, id: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [CLIENT_CHANGES_CHANNEL, id]);
}

export class ClientStore {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
  ) {}

  /** Creates a client. The returned secrets exist only in this return value. */
  async create(name: string, withCallbackSecret: boolean): Promise<IssuedClient> {
    const clientId = token('ens_', 12);
    const clientSecret = token('', 32);
    const callbackSecret = withCallbackSecret ? callbackSecretValue() : undefined;
    await this.db.query(
      'INSERT INTO clients (id, name, secret_hash, callback_secret_enc) VALUES ($1, $2, $3, $4)',
      [
        clientId,
        name,
        await hashSecret(clientSecret),
        callbackSecret === undefined ? null : this.box.seal(callbackSecret),
      ],
    );
    return {
      client_id: clientId,
      client_secret: clientSecret,
      ...(callbackSecret ? { callback_secret: callbackSecret } : {}),
    };
  }

  async get(id: string): Promise<ClientRow | null> {
    const { rows } = await this.db.query(`${SELECT} WHERE id = $1 AND ${LIVE}`, [id]);
    return rows[0] ? toRow(rows[0]) : null;
  }

  async list(): Promise<ClientRow[]> {
    const { rows } = await this.db.query(`${SELECT} WHERE ${LIVE} ORDER BY created_at`);
    return rows.map(toRow);
  }

  /** Replaces the client secret; tokens already minted stay valid until they expire. */
  async rotateSecret(id: string): Promise<IssuedClient | null> {
    const clientSecret = token('', 32);
    const r = await this.db.query(`UPDATE clients SET secret_hash = $2 WHERE id = $1 AND ${LIVE}`, [
      id,
      await hashSecret(clientSecret),
    ]);
    if (r.rowCount === 0) return null;
    await notify(this.db, id);
    return { client_id: id, client_secret: clientSecret };
  }

  /**
   * Issues (or replaces) the callback secret. Callbacks already queued are signed with the new one.
   */
  async issueCallbackSecret(id: string): Promise<IssuedClient | null> {
    const callbackSecret = callbackSecretValue();
    const r = await this.db.query(
      `UPDATE clients SET callback_secret_enc = $2 WHERE id = $1 AND ${LIVE}`,
      [id, this.box.seal(callbackSecret)],
    );
    if (r.rowCount === 0) return null;
    await notify(this.db, id);
    return { client_id: id, client_secret: '', callback_secret: callbackSecret };
  }

  /** Disables a client: its tokens stop working at once in every API process (LISTEN/NOTIFY). */
  async disable(id: string): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE clients SET disabled_at = coalesce(disabled_at, now()) WHERE id = $1 AND ${LIVE}`,
      [id],
    );
    if (r.rowCount === 0) return false;
    await notify(this.db, id);
    return true;
  }

  /**
   * Enables a disabled client again: its secret mints tokens again, and tokens it minted before
   * the disable that have not expired work again (a token is checked against its client's state,
   * not revoked). False for an unknown or deleted client.
   */
  async enable(id: string): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE clients SET disabled_at = NULL WHERE id = $1 AND ${LIVE}`,
      [id],
    );
    if (r.rowCount === 0) return false;
    await notify(this.db, id);
    return true;
  }

  /**
   * Deletes a disabled client for good: its secret hash and callback secret are erased, it is no
   * longer listed and cannot be enabled again. Its row stays, so its records keep a client to
   * name (handoffs, deliveries and callbacks until retention removes them; tenants and suppression
   * lists for good). Deliveries accepted before still reach sent or failed (a 202 is a promise);
   * their callbacks are no longer posted.
   * 'active' when the client must be disabled first, 'unknown' for no such (or a deleted) client.
   */
  async delete(id: string): Promise<'deleted' | 'active' | 'unknown'> {
    const r = await this.db.query(
      `UPDATE clients SET deleted_at = now(), secret_hash = '', callback_secret_enc = NULL
        WHERE id = $1 AND ${LIVE} AND disabled_at IS NOT NULL`,
      [id],
    );
    if (r.rowCount === 0) return (await this.get(id)) ? 'active' : 'unknown';
    await notify(this.db, id);
    return 'deleted';
  }

  /** Sets per-client limits; `null` returns a limit to the configured default. */
  async setLimits(
    id: string,
    limits: { rateLimit?: number | null; dailyQuota?: Partial<Record<Channel, number | null>> },
  ): Promise<boolean> {
    const row = await this.get(id);
    if (!row) return false;
    const quota: Record<string, number> = { ...row.dailyQuota };
    for (const [ch, v] of Object.entries(limits.dailyQuota ?? {})) {
      if (v === null) delete quota[ch];
      else if (v !== undefined) quota[ch] = v;
    }
    const rate = limits.rateLimit === undefined ? row.rateLimit : limits.rateLimit;
    await this.db.query('UPDATE clients SET rate_limit = $2, daily_quota = $3 WHERE id = $1', [
      id,
      rate,
      JSON.stringify(quota),
    ]);
    await notify(this.db, id);
    return true;
  }

  /**
   * Today's (UTC) deliveries per channel, counted from the record itself. The feed index narrows
   * it to rows changed today, which every row created today is (or is about to be stamped).
   */
  async usageToday(id: string): Promise<Record<string, number>> {
    const { rows } = await this.db.query<{ channel: string; n: string }>(
      `SELECT channel, count(*)::text AS n FROM deliveries
        WHERE client_id = $1 AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
          AND (updated_at IS NULL OR updated_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
        GROUP BY channel`,
      [id],
    );
    return Object.fromEntries(rows.map((r) => [r.channel, Number(r.n)]));
  }

  /**
   * False when this process's master key cannot open the callback secrets already stored: without
   * ENS_MASTER_KEY the key lives in ENS_DATA_DIR, so a process started with another data
   * directory would sign nothing and seal secrets the other processes can never read.
   */
  async masterKeyOpensStoredSecrets(): Promise<boolean> {
    const { rows } = await this.db.query<{ sealed: string }>(
      'SELECT callback_secret_enc AS sealed FROM clients WHERE callback_secret_enc IS NOT NULL ' +
        'LIMIT 1',
    );
    if (!rows[0]) return true;
    try {
      this.box.open(rows[0].sealed);
      return true;
    } catch {
      return false;
    }
  }

  openCallbackSecret(row: ClientRow): string | null {
    return row.callbackSecretEnc === null ? null : this.box.open(row.callbackSecretEnc);
  }
}
