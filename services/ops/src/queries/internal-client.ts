import type { Db } from '@ens/core/internal';
import { ALERTS_CLIENT_NAME, ALERTS_TENANT } from '../alerts/notify.ts';

/**
 * ENS's own traffic: the alert emails the console sends through ENS itself, as the client named
 * ens-ops-alerts on the tenant ens-ops (see alerts/notify.ts). The dashboard keeps it out of the
 * customers' numbers and shows it apart; lists label it.
 */
export interface InternalTraffic {
  clientIds: string[];
  tenant: string;
}

export async function loadInternalTraffic(db: Pick<Db, 'query'>): Promise<InternalTraffic> {
  const { rows } = await db.query<{ id: string }>('SELECT id FROM clients WHERE name = $1', [
    ALERTS_CLIENT_NAME,
  ]);
  return { clientIds: rows.map((r) => r.id), tenant: ALERTS_TENANT };
}

export function isInternal(t: InternalTraffic, clientId: string, tenant?: string): boolean {
  return t.clientIds.includes(clientId) && (tenant === undefined || tenant === t.tenant);
}
