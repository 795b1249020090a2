import type { Db } from '../db/pool.ts';
import { isoSql } from '../db/pool.ts';
import type { Tenant, TenantPatch } from '../schemas/tenant.ts';

const COLUMNS = `id AS tenant, name, settings, ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at`;

export class TenantStore {
  constructor(private readonly db: Db) {}

  /**
   * Creates the tenant; `created` is false when it already existed (the stored one is returned).
   */
  async create(
    clientId: string,
    t: { tenant: string; name?: string; settings?: Record<string, unknown> },
  ): Promise<{ created: boolean; tenant: Tenant }> {
    const ins = await this.db.query<Tenant>(
      `INSERT INTO tenants (client_id, id, name, settings) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
      [clientId, t.tenant, t.name ?? null, JSON.stringify(t.settings ?? {})],
    );
    if (ins.rows[0]) return { created: true, tenant: ins.rows[0] };
    const existing = await this.get(clientId, t.tenant);
    if (!existing) throw new Error('tenant vanished between insert and read');
    return { created: false, tenant: existing };
  }

  async get(clientId: string, tenant: string): Promise<Tenant | null> {
    const { rows } = await this.db.query<Tenant>(
      `SELECT ${COLUMNS} FROM tenants WHERE client_id = $1 AND id = $2`,
      [clientId, tenant],
    );
    return rows[0] ?? null;
  }

  async list(clientId: string, opts: { after?: string; limit: number }): Promise<Tenant[]> {
    const { rows } = await this.db.query<Tenant>(
      `SELECT ${COLUMNS} FROM tenants WHERE client_id = $1 AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3`,
      [clientId, opts.after ?? null, opts.limit],
    );
    return rows;
  }

  /**
   * How many tenants the client has, counted up to `bound` (beyond it: atLeast), so a client with
   * a tenant per customer is not counted in full on every view of its page.
   */
  async count(clientId: string, bound = 10_000): Promise<{ n: number; atLeast: boolean }> {
    const { rows } = await this.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM (SELECT 1 FROM tenants WHERE client_id = $1 LIMIT $2) x',
      [clientId, bound + 1],
    );
    const n = rows[0]!.n;
    return n > bound ? { n: bound, atLeast: true } : { n, atLeast: false };
  }

  async update(clientId: string, tenant: string, patch: TenantPatch): Promise<Tenant | null> {
    const { rows } = await this.db.query<Tenant>(
      `UPDATE tenants SET
         name = CASE WHEN $3 THEN $4 ELSE name END,
         settings = CASE WHEN $5 THEN $6::jsonb ELSE settings END,
         updated_at = now()
       WHERE client_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [
        clientId,
        tenant,
        patch.name !== undefined,
        patch.name ?? null,
        patch.settings !== undefined,
        JSON.stringify(patch.settings ?? {}),
      ],
    );
    return rows[0] ?? null;
  }

  /**
   * Deletes a tenant that has no messages; 'in_use' when handoffs refer to it (a foreign key
   * decides, so a racing send cannot slip in).
   */
  async delete(clientId: string, tenant: string): Promise<'deleted' | 'missing' | 'in_use'> {
    try {
      const r = await this.db.query('DELETE FROM tenants WHERE client_id = $1 AND id = $2', [
        clientId,
        tenant,
      ]);
      return r.rowCount ? 'deleted' : 'missing';
    } catch (e) {
      if ((e as { code?: string }).code === '23503') return 'in_use';
      throw e;
    }
  }
}
