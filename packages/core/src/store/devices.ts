import type { Db } from '../db/pool.ts';
import { inTransaction, isoSql } from '../db/pool.ts';
import type { Device } from '../schemas/device.ts';

const COLUMNS = `token, platform, subscription, ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at`;

/**
 * A user may not collect devices without end: old installs should be deleted, or reported dead by
 * the provider.
 */
export const MAX_DEVICES_PER_USER = 100;

export type DeviceUpsert =
  | { created: boolean; device: Device }
  | { refused: 'tenant_missing' | 'too_many' };

/** The push device registry: which devices a tenant's user has, per calling client. */
export class DeviceStore {
  constructor(private readonly db: Db) {}

  async put(
    clientId: string,
    tenant: string,
    userId: string,
    token: string,
    platform: Device['platform'],
    subscription: Device['subscription'],
  ): Promise<DeviceUpsert> {
    // The count and the insert happen under a per-user lock, so two registrations racing for the
    // last place cannot both get it; FOR SHARE keeps the tenant from being deleted meanwhile.
    return inTransaction(this.db, async (c): Promise<DeviceUpsert> => {
      const t = await c.query('SELECT 1 FROM tenants WHERE client_id = $1 AND id = $2 FOR SHARE', [
        clientId,
        tenant,
      ]);
      if (t.rowCount === 0) return { refused: 'tenant_missing' };
      await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `devices:${clientId}:${tenant}:${userId}`,
      ]);
      const { rows } = await c.query<Device & { created: boolean }>(
        `INSERT INTO devices (client_id, tenant, user_id, token, platform, subscription)
              SELECT $1, $2, $3, $4, $5, $6
               WHERE EXISTS (SELECT 1 FROM devices WHERE client_id = $1 AND tenant = $2 AND user_id = $3 AND token = $4)
                  OR (SELECT count(*) FROM devices WHERE client_id = $1 AND tenant = $2 AND user_id = $3) < $7
         ON CONFLICT (client_id, tenant, user_id, token)
         DO UPDATE SET platform = excluded.platform, subscription = excluded.subscription, updated_at = now()
         RETURNING ${COLUMNS}, (xmax = 0) AS created`,
        [
          clientId,
          tenant,
          userId,
          token,
          platform,
          subscription === null ? null : JSON.stringify(subscription),
          MAX_DEVICES_PER_USER,
        ],
      );
      const row = rows[0];
      if (!row) return { refused: 'too_many' };
      const { created, ...device } = row;
      return { created, device };
    });
  }

  async list(clientId: string, tenant: string, userId: string): Promise<Device[]> {
    const { rows } = await this.db.query<Device>(
      `SELECT ${COLUMNS} FROM devices WHERE client_id = $1 AND tenant = $2 AND user_id = $3 ORDER BY created_at, token`,
      [clientId, tenant, userId],
    );
    return rows;
  }

  async remove(clientId: string, tenant: string, userId: string, token: string): Promise<boolean> {
    const r = await this.db.query(
      'DELETE FROM devices WHERE client_id = $1 AND tenant = $2 AND user_id = $3 AND token = $4',
      [clientId, tenant, userId, token],
    );
    return (r.rowCount ?? 0) > 0;
  }
}
