import type { Db } from '../db/pool.ts';
import { Errors } from '../errors.ts';
import type { Channel } from '../schemas/channel.ts';
import type { AcceptInput, AcceptOutcome } from './accept.ts';

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

interface Pending {
  a: AcceptInput;
  resolve: (o: AcceptOutcome) => void;
  reject: (e: unknown) => void;
  /** Sent on its own: its batch failed as a whole, so each item is tried alone to keep errors per item. */
  alone: boolean;
  /** Times the item came back as 'retry': its key's row was gone when read (see ens_accept_batch). */
  retries: number;
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
  text: `SELECT * FROM ens_accept_batch($1::text[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::text[], $7::text[], $8::text[], $9::text[],
    $10::jsonb, $11::int[], $12::uuid[], $13::text[], $14::text[], $15::int[], $16::text[], $17::int[], $18::int[])`,
};

const MAX_RETRIES = 3;

function secondsToUtcMidnight(): number {
  const now = new Date();
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return (next - now.getTime()) / 1000;
}

/** The statement's parameters: one array element per item, per delivery, per quota that applies. */
function params(batch: Pending[]): unknown[] {
  const clients: string[] = [], keys: string[] = [], hashes: string[] = [], responses: string[] = [], handoffs: string[] = [];
  const tenants: string[] = [], eventTypes: string[] = [], references: (string | null)[] = [], callbackUrls: (string | null)[] = [];
  const messages: unknown[] = [];
  const dItems: number[] = [], dIds: string[] = [], dChannels: string[] = [], dRecipients: string[] = [];
  const qItems: number[] = [], qChannels: string[] = [], qCounts: number[] = [], qLimits: number[] = [];
  for (let i = 0; i < batch.length; i++) {
    const a = batch[i]!.a;
    const item = i + 1;
    clients.push(a.clientId);
    keys.push(a.idempotencyKey);
    hashes.push(a.requestHash);
    responses.push(a.responseBody);
    handoffs.push(a.handoffId);
    tenants.push(a.tenant);
    eventTypes.push(a.eventType);
    references.push(a.reference);
    callbackUrls.push(a.callbackUrl);
    messages.push(a.messages);
    // Deliveries per channel, in order of first appearance (the order the quota check reports in).
    const counts = new Map<Channel, number>();
    for (const d of a.deliveries) {
      dItems.push(item);
      dIds.push(d.id);
      dChannels.push(d.channel);
      dRecipients.push(d.recipient);
      counts.set(d.channel, (counts.get(d.channel) ?? 0) + 1);
    }
    for (const [channel, n] of counts) {
      const limit = a.quota(channel);
      if (!(limit > 0)) continue; // 0 = unlimited: no lock, no counter
      qItems.push(item);
      qChannels.push(channel);
      qCounts.push(n);
      qLimits.push(limit);
    }
  }
  return [
    clients, keys, hashes, responses, handoffs, tenants, eventTypes, references, callbackUrls,
    JSON.stringify(messages), dItems, dIds, dChannels, dRecipients, qItems, qChannels, qCounts, qLimits,
  ];
}

/** A failure that PostgreSQL reported for the statement (so it was rolled back), not a lost connection. */
function isStatementError(e: unknown): boolean {
  return typeof e === 'object' && e !== null && typeof (e as { severity?: unknown }).severity === 'string' && (e as { severity: string }).severity === 'ERROR';
}

/**
 * Writes concurrent accepts together: one statement (`ens_accept_batch`), one transaction and one
 * commit for the handoffs that arrived while earlier batches were in flight. Nothing waits on a
 * timer: when a batch slot is free, what is queued goes at the end of the current event-loop turn
 * (so a lone request goes at once); when every slot is busy, requests queue and go together as
 * soon as one frees. Each item keeps its own outcome: a replay, a missing tenant or a quota refuses
 * only that item, and a refused item stores nothing. An item that waits for a lock (a duplicate
 * key in flight, a quota) holds up its batch, not the other slots.
 */
export class AcceptBatcher {
  private readonly maxInFlight: number;
  private readonly maxItems: number;
  private readonly maxDeliveries: number;
  private queue: Pending[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly db: Db,
    opts: AcceptBatcherOptions = {},
  ) {
    this.maxInFlight = opts.maxInFlight ?? 4;
    this.maxItems = opts.maxItems ?? 64;
    this.maxDeliveries = opts.maxDeliveries ?? 2000;
  }

  accept(a: AcceptInput): Promise<AcceptOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ a, resolve, reject, alone: false, retries: 0 });
      this.schedule();
    });
  }

  /** Starts a batch at the end of this event-loop turn, if a slot is free; otherwise a batch ending will. */
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.startBatches();
    });
  }

  private startBatches(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.take();
      this.inFlight++;
      void this.run(batch);
    }
  }

  /** The next batch: queued items in arrival order, within the limits; an `alone` item by itself. */
  private take(): Pending[] {
    const first = this.queue[0]!;
    if (first.alone) return this.queue.splice(0, 1);
    let n = 0;
    let deliveries = 0;
    while (n < this.queue.length && n < this.maxItems) {
      const p = this.queue[n]!;
      if (p.alone) break;
      deliveries += p.a.deliveries.length;
      if (n > 0 && deliveries > this.maxDeliveries) break;
      n++;
    }
    return this.queue.splice(0, n);
  }

  private async run(batch: Pending[]): Promise<void> {
    let rows: Row[] | undefined;
    let error: unknown;
    try {
      rows = (await this.db.query<Row>({ ...SQL, values: params(batch) })).rows;
    } catch (e) {
      error = e;
    }
    this.inFlight--;
    if (error !== undefined && batch.length > 1 && isStatementError(error)) {
      // Rolled back as a whole (an item with a value PostgreSQL refuses, say): try each alone, so
      // only the item at fault fails, as it would have without batching.
      for (const p of batch) p.alone = true;
      this.queue.unshift(...batch);
    } else if (error !== undefined) {
      for (const p of batch) p.reject(error);
    } else if (rows?.length !== batch.length) {
      const e = new Error(`ens_accept_batch returned ${rows?.length} rows for ${batch.length} items`);
      for (const p of batch) p.reject(e);
    } else {
      for (let i = 0; i < batch.length; i++) this.settle(batch[i]!, rows[i]!);
    }
    // What queued while this batch was in flight goes now, ahead of the answers being written.
    this.startBatches();
  }

  private settle(p: Pending, row: Row): void {
    const a = p.a;
    switch (row.outcome) {
      case 'created':
        return p.resolve({ outcome: 'created', responseBody: a.responseBody });
      case 'replay':
        if (row.stored_hash !== a.requestHash) return p.reject(Errors.idempotencyKeyReused());
        return p.resolve({ outcome: 'replay', responseBody: row.stored_response! });
      case 'tenant':
        return p.reject(Errors.tenantNotProvisioned(a.tenant));
      case 'quota':
        return p.reject(Errors.quotaExceeded(row.over_channel ?? 'channel', Number(row.over_quota), secondsToUtcMidnight()));
      case 'retry':
        if (++p.retries > MAX_RETRIES) return p.reject(new Error(`idempotency key kept vanishing while accepting (${MAX_RETRIES} tries)`));
        this.queue.push(p);
        return;
      default:
        return p.reject(new Error(`ens_accept_batch: unknown outcome ${String(row.outcome)}`));
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
