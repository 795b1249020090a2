import { Coalescer } from '../db/coalescer.ts';
import type { Db } from '../db/pool.ts';
import { Errors } from '../errors.ts';
import { acceptBatchDuration, acceptBatchHandoffs } from '../metrics.ts';
import type { Channel } from '../schemas/channel.ts';
import type { AcceptInput, AcceptOutcome } from './accept-input.ts';

export interface AcceptBatcherOptions {
  /**
   * Batches in flight at once, each on its own connection (default 4). More than one lets a batch
   * execute while the previous one waits for its commit and while its answers are written; on
   * the 2-core bench machine 4 did better than 1 to 3 and no worse than 8.
   */
  maxInFlight?: number;
  /** Most handoffs in one batch (default 64). */
  maxItems?: number;
  /** Most deliveries in one batch; a larger handoff goes alone (default 2000). */
  maxDeliveries?: number;
}

interface Row {
  outcome: 'created' | 'replay' | 'tenant' | 'quota' | 'retry';
  stored_response: string | null;
  stored_hash: string | null;
  over_channel: string | null;
  over_quota: number | null;
}

const SQL = {
  name: 'ens_accept_batch',
  text: 'SELECT * FROM ens_accept_batch(p_items => $1::jsonb)',
};

const MAX_RETRIES = 3;

export function secondsToUtcMidnight(): number {
  const now = new Date();
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return (next - now.getTime()) / 1000;
}

/**
 * A JSON escape of NUL or of a lone surrogate, after an even number of backslashes (so it is an
 * escape, not an escaped backslash followed by the letters).
 */
const UNREPRESENTABLE = /(?<!\\)((?:\\\\)*)\\u(0000|d[89a-f][0-9a-f]{2})/g;

/**
 * The item's fields as PostgreSQL text would hold them, had they been sent as text parameters:
 * a NUL is sent raw, so PostgreSQL refuses the statement (22021) as it refuses any text with one,
 * and a lone surrogate becomes U+FFFD, as the driver's UTF-8 encoding makes it. (JSON.stringify
 * escapes both; jsonb would refuse the first with another code and the second outright.)
 * JSON.stringify writes every other character that needs an escape as a real character.
 */
function asPgText(json: string): string {
  if (!json.includes('\\u')) return json;
  return json.replace(
    UNREPRESENTABLE,
    (_, slashes: string, code: string) => slashes + (code === '0000' ? '\u0000' : '\ufffd'),
  );
}

/**
 * One item of `ens_accept_batch`'s p_items. The messages are spliced in as JSON.stringify wrote
 * them, as they were always stored.
 */
function itemJson(a: AcceptInput): string {
  // Deliveries per channel, in order of first appearance (the order the quota check reports in).
  const counts = new Map<Channel, number>();
  for (const d of a.deliveries) counts.set(d.channel, (counts.get(d.channel) ?? 0) + 1);
  const quotas: { channel: Channel; count: number; quota: number }[] = [];
  for (const [channel, count] of counts) {
    const quota = a.quota(channel);
    if (quota > 0) quotas.push({ channel, count, quota }); // 0 = unlimited: no lock, no counter
  }
  const fields = asPgText(
    JSON.stringify({
      client_id: a.clientId,
      key: a.idempotencyKey,
      request_hash: a.requestHash,
      response: a.responseBody,
      handoff_id: a.handoffId,
      tenant: a.tenant,
      event_type: a.eventType,
      reference: a.reference,
      callback_url: a.callbackUrl,
      deliveries: a.deliveries.map((d) => ({
        id: d.id,
        channel: d.channel,
        recipient: d.recipient,
      })),
      quotas,
      ...(a.mediaRefs?.length
        ? { media_refs: a.mediaRefs.map((r) => ({ key: r.key, delivery_id: r.deliveryId })) }
        : {}),
      ...(a.traceparent ? { traceparent: a.traceparent } : {}),
    }),
  );
  return `${fields.slice(0, -1)},"messages":${JSON.stringify(a.messages) ?? 'null'}}`;
}

/**
 * A failure that PostgreSQL reported for the statement (so it was rolled back), not a lost
 * connection.
 */
function isStatementError(e: unknown): boolean {
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof (e as { severity?: unknown }).severity === 'string' &&
    (e as { severity: string }).severity === 'ERROR'
  );
}

/**
 * Writes concurrent accepts together: one statement (`ens_accept_batch`), one transaction and one
 * commit for the handoffs that arrived while earlier batches were in flight. Nothing waits on a
 * timer: when a batch slot is free, what is queued goes at the end of the current event-loop turn
 * (so a lone request goes at once); when every slot is busy, requests queue and go together as
 * soon as one frees. Each item keeps its own outcome: a replay, a missing tenant or a quota refuses
 * only that item, and a refused item stores nothing. An item that waits for a lock (a duplicate
 * key in flight, a quota) holds up its batch, not the other slots. A batch that PostgreSQL
 * refuses as a whole (an item with a value it cannot store) is tried again item by item, so only
 * the item at fault fails, as it would have without batching.
 */
export class AcceptBatcher {
  readonly #batches: Coalescer<AcceptInput, Row>;

  constructor(db: Db, opts: AcceptBatcherOptions = {}) {
    const run = async (items: AcceptInput[]): Promise<Row[]> => {
      const values = [`[${items.map(itemJson).join(',')}]`];
      const done = acceptBatchDuration.startTimer();
      const { rows } = await db.query<Row>({ ...SQL, values });
      done();
      acceptBatchHandoffs.observe(items.length);
      return rows;
    };
    this.#batches = new Coalescer(run, {
      maxBatch: opts.maxItems ?? 64,
      maxInFlight: opts.maxInFlight ?? 4,
      flush: 'end-of-turn',
      weight: (a) => a.deliveries.length,
      maxWeight: opts.maxDeliveries ?? 2000,
      isolate: isStatementError,
    });
  }

  async accept(a: AcceptInput): Promise<AcceptOutcome> {
    for (let tries = 0; ; tries++) {
      const row = await this.#batches.call(a);
      switch (row.outcome) {
        case 'created':
          return { outcome: 'created', responseBody: a.responseBody };
        case 'replay':
          if (row.stored_hash !== a.requestHash) throw Errors.idempotencyKeyReused();
          return { outcome: 'replay', responseBody: row.stored_response! };
        case 'tenant':
          throw Errors.tenantNotProvisioned(a.tenant);
        case 'quota':
          throw Errors.quotaExceeded(
            row.over_channel ?? 'channel',
            Number(row.over_quota),
            secondsToUtcMidnight(),
          );
        case 'retry':
          // The key's row was gone when read (see ens_accept_batch): send the item again.
          if (tries >= MAX_RETRIES)
            throw new Error(
              `idempotency key kept vanishing while accepting (${MAX_RETRIES} tries)`,
            );
          continue;
        default:
          throw new Error(`ens_accept_batch: unknown outcome ${String(row.outcome)}`);
      }
    }
  }
}

const batchers = new WeakMap<Db, AcceptBatcher>();

/** The batcher that writes accepts through `db` (one per pool, made on first use). */
export function acceptBatcherFor(db: Db): AcceptBatcher {
  let b = batchers.get(db);
  if (!b) {
    b = new AcceptBatcher(db);
    batchers.set(db, b);
  }
  return b;
}
