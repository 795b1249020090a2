import type { Db } from '../../db/pool.ts';
import type { Channel } from '../../schemas/channel.ts';

/** What a resend copies from the delivery it resends: its handoff's facts and its content. */
export interface ResendSource {
  client_id: string;
  tenant: string;
  event_type: string;
  reference: string | null;
  channel: Channel;
  recipient: string;
  status: string;
  /** The stored content of its channel (inline images as storage keys); null when none is left. */
  content: Record<string, unknown> | null;
}

/** The delivery `id` as a resend needs it, or null when the record has no such delivery. */
export async function readResendSource(
  db: Pick<Db, 'query'>,
  id: string,
): Promise<ResendSource | null> {
  const { rows } = await db.query<ResendSource>(
    `SELECT d.client_id, d.tenant, d.event_type, d.reference, d.channel, d.recipient, d.status, h.messages -> d.channel AS content
       FROM deliveries d JOIN handoffs h ON h.id = d.handoff_id WHERE d.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}
