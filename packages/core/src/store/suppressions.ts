import type { Db, DbClient } from '../db/pool.ts';
import { inTransaction, isoSql } from '../db/pool.ts';
import { deliveryAddressSql, normaliseAddress } from '../consent/address.ts';
import { wakeFeed, type WakeupTarget } from '../nats/wakeups.ts';
import { Errors } from '../errors.ts';
import { CHANNEL_RULES } from '../domain/channels.ts';
import { CHANNELS, type Channel } from '../schemas/channel.ts';
import type {
  ConsentPolicy,
  Suppression,
  SuppressionPage,
  SuppressionQuery,
  SuppressionReasonT,
  SuppressionSourceT,
} from '../schemas/suppression.ts';
import { SUPPRESSION_REASONS } from '../schemas/suppression.ts';

/** The channels where must-deliver event types pass an opt-out or complaint (their rows say so). */
const MUST_DELIVER_CHANNELS = CHANNELS.filter((c) => CHANNEL_RULES[c].mustDeliverPassesOptOut)
  .map((c) => `'${c}'`)
  .join(', ');

/**
 * The condition under which suppressions row `s` (joined to its client as `sc`) stops delivery
 * row `alias`: same tenant, channel and address, a scope covering the event type, not lapsed, a
 * reason the client's policy enforces, and not an email or push opt-out or complaint against an
 * event type the client marked must-deliver. One text, used by the claim (which skips suppressed
 * rows) and by the look-up that names the entry, so the two cannot disagree.
 */
export const suppressionMatchSql = (alias: string): string => `
      s.client_id = ${alias}.client_id AND s.tenant = ${alias}.tenant AND s.channel = ${alias}.channel
  AND s.address = ${deliveryAddressSql(alias)} AND s.scope IN ('*', ${alias}.event_type)
  AND (s.expires_at IS NULL OR s.expires_at > now())
  AND s.reason = ANY (sc.suppression_reasons)
  AND NOT (s.reason IN ('opt_out', 'complaint') AND s.channel IN (${MUST_DELIVER_CHANNELS}) AND ${alias}.event_type = ANY (sc.must_deliver_event_types))`;

/**
 * The entry that stops delivery row `alias`, as a correlated subquery. OFFSET 0 keeps it a subplan
 * run per row (by primary key), so no plan can turn it into a scan of a list of millions.
 */
export const suppressedSql = (alias: string): string =>
  `EXISTS (SELECT 1 FROM suppressions s JOIN clients sc ON sc.id = s.client_id WHERE ${suppressionMatchSql(alias)} OFFSET 0)`;

/** The entry that stopped a delivery, as `last_error` names it. */
export interface SuppressionHit {
  reason: SuppressionReasonT;
  scope: string;
  address: string;
  since: string;
  source: SuppressionSourceT;
  detail: string | null;
}

export function suppressionError(hit: SuppressionHit): string {
  const scope = hit.scope === '*' ? '' : ` for event type ${hit.scope}`;
  const evidence = hit.detail ? `: ${hit.detail}` : '';
  return `suppressed: ${hit.address} is on the suppression list (${hit.reason}${scope}, ${hit.source}) since ${hit.since}${evidence}`;
}

export interface SuppressionInput {
  tenant: string;
  channel: Channel;
  /** As given; normalised here. */
  address: string;
  scope?: string;
  reason: SuppressionReasonT;
  source: SuppressionSourceT;
  provider?: string | null;
  deliveryId?: string | null;
  detail?: string | null;
  createdBy?: string | null;
  /** ISO date-time; soft_bounce without one holds for the store's softBounceHoldMs. */
  expiresAt?: string | null;
}

/** What a report about a recipient is, once ENS has read it. */
export type ReportKind = SuppressionReasonT | 'opt_in';

const COLUMNS = `tenant, channel, address, scope, reason, source, provider, delivery_id::text AS delivery_id, detail, created_by,
  ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at, ${isoSql('expires_at')} AS expires_at`;

/** The evidence kept with an entry is bounded: a whole bounce message is not evidence. */
const MAX_DETAIL = 1000;

/**
 * Evidence is bounded, and control characters other than line breaks and tabs (a NUL, which
 * PostgreSQL's text refuses) are blanked, whoever reported it; a provider's words over two lines
 * stay two lines.
 */
const clip = (raw: string | null | undefined): string | null => {
  if (raw == null) return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: what evidence must not keep
  const s = raw.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, ' ');
  return s.length > MAX_DETAIL ? `${s.slice(0, MAX_DETAIL - 1)}…` : s;
};

/*
 * One upsert for every way an entry is written. A newer report replaces the older entry's reason
 * and evidence, except that a soft bounce never downgrades a standing entry of another reason (it
 * would make a hard bounce lapse); a soft bounce over a soft bounce extends its hold.
 */
const UPSERT_SQL = `
INSERT INTO suppressions AS s (client_id, tenant, channel, address, scope, reason, source, provider, delivery_id, detail, created_by, expires_at)
SELECT $1, x.tenant, x.channel, x.address, x.scope, x.reason, x.source, x.provider, x.delivery_id, x.detail, x.created_by, x.expires_at
  FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::uuid[], $10::text[], $11::text[], $12::timestamptz[])
    AS x(tenant, channel, address, scope, reason, source, provider, delivery_id, detail, created_by, expires_at)
ON CONFLICT (client_id, tenant, channel, address, scope) DO UPDATE
   SET reason = excluded.reason, source = excluded.source, provider = excluded.provider, delivery_id = excluded.delivery_id,
       detail = excluded.detail, created_by = excluded.created_by, expires_at = excluded.expires_at, updated_at = now()
 WHERE excluded.reason <> 'soft_bounce' OR s.reason = 'soft_bounce' OR (s.expires_at IS NOT NULL AND s.expires_at <= now())
RETURNING ${COLUMNS}, (xmax = 0) AS created`;

interface Normalised {
  tenant: string;
  channel: Channel;
  address: string;
  scope: string;
  reason: SuppressionReasonT;
  source: SuppressionSourceT;
  provider: string | null;
  deliveryId: string | null;
  detail: string | null;
  createdBy: string | null;
  expiresAt: string | null;
}

function encodeCursor(s: Pick<Suppression, 'channel' | 'address' | 'scope'>): string {
  return Buffer.from(JSON.stringify([s.channel, s.address, s.scope])).toString('base64url');
}

function decodeCursor(cursor: string): [string, string, string] {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'string'))
      return v as [string, string, string];
  } catch {
    // fall through
  }
  throw Errors.validation('cursor is not a next_cursor this service returned', [
    { path: '/cursor', message: 'unknown cursor' },
  ]);
}

/** Which tenants a report about an address applies to. */
interface ReportTarget {
  clientId: string;
  tenant: string;
}

/**
 * The suppression list of each client and tenant, and its consent policy. Reads and writes here;
 * the send path reads the list inside the claim (see suppressedSql in deliveries.ts).
 */
export class SuppressionStore {
  /**
   * @param wake where the feed's wake-up goes after a report marks a delivery (bounced_at,
   *   complained_at): the store publishes it itself after its commit, as every store does
   */
  constructor(
    private readonly db: Db,
    private readonly opts: { softBounceHoldMs: number },
    private readonly wake: WakeupTarget | null = null,
  ) {}

  /** Normalises an input or names what is wrong with it (a 400 at the API). */
  normalise(e: SuppressionInput): Normalised {
    const address = normaliseAddress(e.channel, e.address);
    if (address === null) {
      throw Errors.validation(`"${e.address.slice(0, 100)}" is not a ${e.channel} address`, [
        { path: '/address', message: `not a ${e.channel} address` },
      ]);
    }
    let expiresAt = e.expiresAt ?? null;
    if (expiresAt === null && e.reason === 'soft_bounce')
      expiresAt = new Date(Date.now() + this.opts.softBounceHoldMs).toISOString();
    return {
      tenant: e.tenant,
      channel: e.channel,
      address,
      scope: e.scope ?? '*',
      reason: e.reason,
      source: e.source,
      provider: e.provider ?? null,
      deliveryId: e.deliveryId ?? null,
      detail: clip(e.detail),
      createdBy: e.createdBy ?? null,
      expiresAt,
    };
  }

  /**
   * Adds or updates entries (one statement). The tenants must exist for the client; the caller
   * checks that for entries given by hand. Returns the entries as stored and how many are new.
   */
  async upsert(
    clientId: string,
    inputs: readonly SuppressionInput[],
    via: Db | DbClient = this.db,
  ): Promise<{ entries: Suppression[]; created: number }> {
    if (inputs.length === 0) return { entries: [], created: 0 };
    // One statement cannot upsert one key twice: the last of duplicates wins, as if sent in turn.
    const byKey = new Map<string, Normalised>();
    for (const i of inputs) {
      const n = this.normalise(i);
      byKey.set(JSON.stringify([n.tenant, n.channel, n.address, n.scope]), n);
    }
    const rows = [...byKey.values()];
    const col = <K extends keyof Normalised>(k: K) => rows.map((r) => r[k]);
    const r = await via.query<Suppression & { created: boolean }>(UPSERT_SQL, [
      clientId,
      col('tenant'),
      col('channel'),
      col('address'),
      col('scope'),
      col('reason'),
      col('source'),
      col('provider'),
      col('deliveryId'),
      col('detail'),
      col('createdBy'),
      col('expiresAt'),
    ]);
    let created = 0;
    const entries = r.rows.map(({ created: c, ...e }) => {
      if (c) created++;
      return e as Suppression;
    });
    return { entries, created };
  }

  /** Removes an address's entries (one scope, or all of them); returns how many. */
  async remove(
    clientId: string,
    tenant: string,
    channel: Channel,
    address: string,
    scope?: string,
  ): Promise<Suppression[]> {
    const key = normaliseAddress(channel, address);
    if (key === null) return [];
    const { rows } = await this.db.query<Suppression>(
      `DELETE FROM suppressions WHERE client_id = $1 AND tenant = $2 AND channel = $3 AND address = $4 AND ($5::text IS NULL OR scope = $5)
       RETURNING ${COLUMNS}`,
      [clientId, tenant, channel, key, scope ?? null],
    );
    return rows;
  }

  /** One page of a tenant's list in (channel, address, scope) order. */
  async list(clientId: string, tenant: string, q: SuppressionQuery): Promise<SuppressionPage> {
    const limit = q.limit ?? 100;
    const after = q.cursor !== undefined ? decodeCursor(q.cursor) : null;
    let address: string | null = null;
    if (q.address !== undefined) {
      if (q.channel === undefined)
        throw Errors.validation('address needs channel: an address is normalised by its channel', [
          { path: '/channel', message: 'required with address' },
        ]);
      address = normaliseAddress(q.channel, q.address);
      if (address === null) return { results: [], next_cursor: null };
    }
    const { rows } = await this.db.query<Suppression>(
      `SELECT ${COLUMNS} FROM suppressions
        WHERE client_id = $1 AND tenant = $2 AND ($3::text IS NULL OR channel = $3) AND ($4::text IS NULL OR reason = $4)
          AND ($5::text IS NULL OR address = $5)
          AND ($6::text IS NULL OR (channel, address, scope) > ($6, $7, $8))
        ORDER BY channel, address, scope LIMIT $9`,
      [
        clientId,
        tenant,
        q.channel ?? null,
        q.reason ?? null,
        address,
        after?.[0] ?? null,
        after?.[1] ?? null,
        after?.[2] ?? null,
        limit,
      ],
    );
    const last = rows[rows.length - 1];
    return {
      results: rows,
      next_cursor: rows.length === limit && last ? encodeCursor(last) : null,
    };
  }

  /** The client's consent policy. */
  async policy(clientId: string): Promise<ConsentPolicy | null> {
    const { rows } = await this.db.query<ConsentPolicy>(
      'SELECT suppression_reasons, bulk_event_types, must_deliver_event_types FROM clients ' +
        'WHERE id = $1',
      [clientId],
    );
    return rows[0] ?? null;
  }

  /**
   * Changes the named parts of a client's consent policy; returns it, or null for an unknown
   * client.
   */
  async setPolicy(clientId: string, p: Partial<ConsentPolicy>): Promise<ConsentPolicy | null> {
    for (const r of p.suppression_reasons ?? []) {
      if (!(SUPPRESSION_REASONS as readonly string[]).includes(r))
        throw Errors.badRequest(
          `"${r}" is not a suppression reason; use ${SUPPRESSION_REASONS.join(', ')}`,
        );
    }
    const { rows } = await this.db.query<ConsentPolicy>(
      `UPDATE clients SET suppression_reasons = coalesce($2, suppression_reasons), bulk_event_types = coalesce($3, bulk_event_types),
              must_deliver_event_types = coalesce($4, must_deliver_event_types)
        WHERE id = $1 RETURNING suppression_reasons, bulk_event_types, must_deliver_event_types`,
      [
        clientId,
        p.suppression_reasons ? [...new Set(p.suppression_reasons)] : null,
        p.bulk_event_types ? [...new Set(p.bulk_event_types)] : null,
        p.must_deliver_event_types ? [...new Set(p.must_deliver_event_types)] : null,
      ],
    );
    return rows[0] ?? null;
  }

  /**
   * A report about one delivery (a bounce or complaint by mail or webhook, a refusal, an
   * unsubscribe): suppresses its address and, for a bounce or complaint, marks the delivery, which
   * keeps its terminal status. `scope` '*' unless an unsubscribe names its event type. Returns
   * null when no such delivery exists (or it was removed by retention). Wakes the feed after its
   * commit when the delivery changed.
   */
  async reportForDelivery(
    find: { deliveryId: string } | { provider: string; providerMessageId: string },
    r: {
      kind: ReportKind;
      source: SuppressionSourceT;
      provider?: string | null;
      detail: string;
      at: Date;
      scopeToEventType?: boolean;
    },
  ): Promise<{ deliveryId: string; clientId: string; entries: number; changed: boolean } | null> {
    const res = await this.#reportForDelivery(find, r);
    if (res?.changed && this.wake) wakeFeed(this.wake.nc);
    return res;
  }

  #reportForDelivery(
    find: { deliveryId: string } | { provider: string; providerMessageId: string },
    r: {
      kind: ReportKind;
      source: SuppressionSourceT;
      provider?: string | null;
      detail: string;
      at: Date;
      scopeToEventType?: boolean;
    },
  ): Promise<{ deliveryId: string; clientId: string; entries: number; changed: boolean } | null> {
    return inTransaction(this.db, async (c) => {
      const byId = 'deliveryId' in find;
      const found = await c.query<{
        id: string;
        client_id: string;
        tenant: string;
        channel: Channel;
        recipient: string;
        event_type: string;
        status: string;
      }>(
        `SELECT id, client_id, tenant, channel, recipient, event_type, status FROM deliveries
          WHERE ${byId ? 'id = $1::uuid' : 'provider = $1 AND provider_message_id = $2'} FOR UPDATE`,
        byId ? [find.deliveryId] : [find.provider, find.providerMessageId],
      );
      const d = found.rows[0];
      if (!d) return null;
      let entries = 0;
      if (r.kind === 'opt_in') {
        entries = await this.#optIn(
          c,
          [{ clientId: d.client_id, tenant: d.tenant }],
          d.channel,
          d.recipient,
        );
      } else {
        const res = await this.upsert(
          d.client_id,
          [
            {
              tenant: d.tenant,
              channel: d.channel,
              address: d.recipient,
              scope: r.scopeToEventType ? d.event_type : '*',
              reason: r.kind,
              source: r.source,
              provider: r.provider ?? null,
              deliveryId: d.id,
              detail: r.detail,
            },
          ],
          c,
        );
        entries = res.entries.length;
      }
      let changed = false;
      const at = r.at.toISOString();
      if (r.kind === 'hard_bounce' || r.kind === 'soft_bounce' || r.kind === 'complaint') {
        await c.query(
          'INSERT INTO delivery_events (delivery_id, kind, occurred_at, detail) VALUES ($1, ' +
            '$2, $3, $4)',
          [d.id, r.kind, at, clip(r.detail)],
        );
        const column = r.kind === 'complaint' ? 'complained_at' : 'bounced_at';
        const upd = await c.query(
          `UPDATE deliveries SET ${column} = $2, version = version + 1, stamp_pending = true WHERE id = $1 AND ${column} IS NULL`,
          [d.id, at],
        );
        changed = (upd.rowCount ?? 0) > 0;
      }
      return { deliveryId: d.id, clientId: d.client_id, entries, changed };
    });
  }

  /**
   * A report about an address on its own (an SMS STOP or START, a WhatsApp block without a message
   * id): applied to every tenant that sends from the sender it was written to (see #targets).
   */
  async reportForAddress(r: {
    kind: ReportKind;
    provider: string;
    channel: Channel;
    address: string;
    sender?: { id: string; isDefault: boolean };
    detail: string;
  }): Promise<{ entries: number }> {
    const address = normaliseAddress(r.channel, r.address);
    if (address === null) return { entries: 0 };
    const targets = await this.#targets(r.channel, r.sender);
    if (targets.length === 0) return { entries: 0 };
    if (r.kind === 'opt_in')
      return { entries: await this.#optIn(this.db, targets, r.channel, address) };
    let entries = 0;
    const byClient = new Map<string, string[]>();
    for (const t of targets)
      byClient.set(t.clientId, [...(byClient.get(t.clientId) ?? []), t.tenant]);
    for (const [clientId, tenants] of byClient) {
      const res = await this.upsert(
        clientId,
        tenants.map((tenant) => ({
          tenant,
          channel: r.channel,
          address,
          reason: r.kind as SuppressionReasonT,
          source: 'provider' as const,
          provider: r.provider,
          detail: r.detail,
        })),
      );
      entries += res.entries.length;
    }
    return { entries };
  }

  /**
   * A report about an address alone must name the sender it was written to: a scan of every
   * delivery for its recipient would cost the whole record, and a STOP binds only its sender.
   */
  async #targets(
    channel: Channel,
    sender: { id: string; isDefault: boolean } | undefined,
  ): Promise<ReportTarget[]> {
    if (!sender) return [];
    // The setting that names the sender a tenant sends from, per channel.
    const key = channel === 'whatsapp' ? 'whatsapp_phone_number_id' : 'sender_id';
    const { rows } = await this.db.query<ReportTarget>(
      `SELECT client_id AS "clientId", id AS tenant FROM tenants
        WHERE ltrim(settings ->> $1, '+') = $2 OR ($3 AND (settings ->> $1) IS NULL)`,
      [key, sender.id.replace(/^\+/, ''), sender.isDefault],
    );
    return rows;
  }

  /** An opt-in (START) lifts opt-outs of the address, and nothing else: a bounce still stands. */
  async #optIn(
    via: Db | DbClient,
    targets: readonly ReportTarget[],
    channel: Channel,
    address: string,
  ): Promise<number> {
    const key = normaliseAddress(channel, address);
    if (key === null) return 0;
    const r = await via.query(
      `DELETE FROM suppressions s USING unnest($1::text[], $2::text[]) AS t(client_id, tenant)
        WHERE s.client_id = t.client_id AND s.tenant = t.tenant AND s.channel = $3 AND s.address = $4 AND s.reason = 'opt_out'`,
      [targets.map((t) => t.clientId), targets.map((t) => t.tenant), channel, key],
    );
    return r.rowCount ?? 0;
  }

  /** Removes lapsed soft-bounce entries; returns how many. */
  async purgeLapsed(limit = 10_000): Promise<number> {
    const r = await this.db.query(
      `DELETE FROM suppressions WHERE ctid IN (SELECT ctid FROM suppressions WHERE expires_at <= now() LIMIT $1)`,
      [limit],
    );
    return r.rowCount ?? 0;
  }
}
