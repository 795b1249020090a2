import type { Db } from '../db/pool.ts';
import type { FlowWeights } from '../scheduling/fair-queue.ts';

/** What the operator set for one client's deliveries. */
export interface ClientSchedule {
  weight: number;
  priorityEventTypes: string[];
  /** Tenants whose weight is not 1. */
  tenantWeights: Record<string, number>;
}

export const MAX_SEND_WEIGHT = 100;
const MAX_PRIORITY_TYPES = 50;

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

/**
 * A weight as an operator types it: a whole number from 1 to MAX_SEND_WEIGHT; empty or `default` is
 * 1.
 */
export function parseSendWeight(text: string): Parsed<number> {
  const t = text.trim();
  if (t === '' || t === 'default') return { ok: true, value: 1 };
  const n = Number(t);
  if (!/^\d+$/.test(t) || n < 1 || n > MAX_SEND_WEIGHT)
    return {
      ok: false,
      message: `a weight is a whole number from 1 to ${MAX_SEND_WEIGHT} (or default); "${t}" is not one`,
    };
  return { ok: true, value: n };
}

/**
 * Priority event types as an operator types them: comma-separated, each an event type with `*`
 * for any characters; empty or `none` is none.
 */
export function parsePriorityEventTypes(text: string): Parsed<string[]> {
  const t = text.trim();
  if (t === '' || t === 'none') return { ok: true, value: [] };
  const list = t
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const bad = list.find((p) => p.length > 200 || /\s/.test(p));
  if (bad !== undefined)
    return {
      ok: false,
      message: `an event type has no spaces and at most 200 characters; "${bad}" is not one`,
    };
  if (list.length > MAX_PRIORITY_TYPES)
    return { ok: false, message: `at most ${MAX_PRIORITY_TYPES} event types` };
  return { ok: true, value: list };
}

/** `otp.*` → /^otp\..*$/: `*` is any run of characters, everything else is literal. */
function globToRegExp(glob: string): RegExp {
  return new RegExp(
    `^${glob
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
}

/**
 * Reads and writes the operator's weights and priority event types (`ens clients schedule`, the
 * console).
 */
export class SchedulingStore {
  constructor(private readonly db: Db) {}

  async get(clientId: string): Promise<ClientSchedule | null> {
    const { rows } = await this.db.query<{
      send_weight: number;
      priority_event_types: string[];
      tenants: Record<string, number>;
    }>(
      `SELECT c.send_weight, c.priority_event_types,
              coalesce((SELECT jsonb_object_agg(t.id, t.send_weight) FROM tenants t WHERE t.client_id = c.id AND t.send_weight <> 1), '{}') AS tenants
         FROM clients c WHERE c.id = $1`,
      [clientId],
    );
    const r = rows[0];
    return r
      ? {
          weight: r.send_weight,
          priorityEventTypes: r.priority_event_types,
          tenantWeights: r.tenants,
        }
      : null;
  }

  /** Returns false when there is no such client. */
  async setClient(
    clientId: string,
    s: { weight?: number; priorityEventTypes?: string[] },
  ): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE clients SET send_weight = coalesce($2, send_weight), priority_event_types = coalesce($3, priority_event_types) WHERE id = $1`,
      [clientId, s.weight ?? null, s.priorityEventTypes ?? null],
    );
    return r.rowCount === 1;
  }

  /** Returns false when the client has no such tenant. */
  async setTenant(clientId: string, tenant: string, weight: number): Promise<boolean> {
    const r = await this.db.query(
      'UPDATE tenants SET send_weight = $3 WHERE client_id = $1 AND id = $2',
      [clientId, tenant, weight],
    );
    return r.rowCount === 1;
  }
}

interface Snapshot {
  clients: Map<string, { weight: number; priority: RegExp[] }>;
  tenants: Map<string, number>;
}

const EMPTY: Snapshot = { clients: new Map(), tenants: new Map() };

/**
 * The worker's copy of the operator's scheduling settings, read again every `everyMs` (only the
 * rows that differ from the defaults), so a change takes effect within that time in every worker
 * process. A failed read keeps the previous copy.
 */
export class SchedulingPolicy {
  #snapshot: Snapshot = EMPTY;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly db: Db) {}

  readonly weights: FlowWeights = {
    client: (client) => this.#snapshot.clients.get(client)?.weight ?? 1,
    tenant: (client, tenant) => this.#snapshot.tenants.get(`${client} ${tenant}`) ?? 1,
  };

  /** Whether the client named this event type for its priority lane. */
  isPriority(clientId: string, eventType: string): boolean {
    const c = this.#snapshot.clients.get(clientId);
    return c?.priority.some((re) => re.test(eventType)) ?? false;
  }

  async refresh(): Promise<void> {
    const [clients, tenants] = await Promise.all([
      this.db.query<{ id: string; send_weight: number; priority_event_types: string[] }>(
        `SELECT id, send_weight, priority_event_types FROM clients WHERE send_weight <> 1 OR priority_event_types <> '{}'`,
      ),
      this.db.query<{ client_id: string; id: string; send_weight: number }>(
        'SELECT client_id, id, send_weight FROM tenants WHERE send_weight <> 1',
      ),
    ]);
    this.#snapshot = {
      clients: new Map(
        clients.rows.map((r) => [
          r.id,
          { weight: r.send_weight, priority: r.priority_event_types.map(globToRegExp) },
        ]),
      ),
      tenants: new Map(tenants.rows.map((r) => [`${r.client_id} ${r.id}`, r.send_weight])),
    };
  }

  /** Reads now, then every `everyMs`; a failed read is retried at the next tick. */
  async start(everyMs = 5_000, onError?: (err: unknown) => void): Promise<void> {
    await this.refresh().catch((err: unknown) => onError?.(err));
    this.#timer = setInterval(
      () => void this.refresh().catch((err: unknown) => onError?.(err)),
      everyMs,
    );
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
