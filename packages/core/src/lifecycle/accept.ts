import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.ts';
import type { PlannedDelivery } from '../domain/handoff-rules.ts';
import { newId } from '../ids.ts';
import { wakeFeed, wakeSenders } from '../nats/wakeups.ts';
import type { Channel } from '../schemas/channel.ts';
import type { AcceptedHandoff } from '../schemas/handoff.ts';
import { acceptHandoff, type AcceptInput } from '../store/accept.ts';

/*
 * The one door a handoff comes in by, whoever hands it off (POST /v2/messages, the console's alert
 * emails and resends): it mints the ids, writes the 202 body, stores the handoff and its deliveries
 * (the accept batcher's one statement and commit), and after that commit wakes the senders of its
 * deliveries and the feed. A caller never publishes a wake-up itself, so no accept path can forget
 * one; a wake-up lost anyway (NATS away) is made good by the sweeper and the feed's poll.
 */

/** What the door needs of a Runtime. */
export interface AcceptDeps {
  db: Db;
  nc: NatsConnection;
  logger: Logger;
}

/** The handoff and its deliveries as minted, before anything is stored. */
export interface AcceptDraft {
  handoffId: string;
  deliveries: { id: string; channel: Channel; recipient: string }[];
}

/** What `prepare` adds to the handoff before it is stored, or the stored 202 of a replay. */
export type Prepared =
  | { replay: string }
  | { mediaRefs?: AcceptInput['mediaRefs']; traceparent?: string | null };

export interface HandoffToAccept {
  clientId: string;
  idempotencyKey: string;
  requestHash: string;
  tenant: string;
  eventType: string;
  reference: string | null;
  callbackUrl: string | null;
  /**
   * The deliveries to make, in the 202's order (planDeliveries' plan); the door gives each its id.
   */
  planned: readonly PlannedDelivery[];
  /** Messages as stored, by channel: inline image bytes already replaced by storage keys. */
  messages: unknown;
  /** Daily quota per channel for this client (0 = unlimited). */
  quota: (channel: Channel) => number;
  /** W3C traceparent to store with the handoff (see AcceptInput); `prepare` may give it instead. */
  traceparent?: string | null;
  /**
   * Called once the ids are minted and before anything is stored, for what needs them: a request
   * with inline images checks its refusals and writes its files here (files outlive a rolled-back
   * transaction), returning their references, or the stored 202 of a replay, which is then
   * answered as it is, with nothing stored and nothing woken.
   */
  prepare?: (draft: AcceptDraft) => Promise<Prepared> | Prepared;
}

export type Accepted =
  | ({ outcome: 'created'; responseBody: string } & AcceptDraft)
  | { outcome: 'replay'; responseBody: string };

/**
 * Accepts one handoff: stores it and all its deliveries atomically (throwing the HttpError of a
 * refusal: tenant not provisioned, quota exceeded, key reused with another body) and, when it was
 * created, wakes their senders and the feed after the commit. A replay of the idempotency key
 * answers the original 202 body and wakes nothing. The 202 must not wait for JetStream: the
 * wake-ups are published without waiting for an acknowledgement.
 */
export async function accept(deps: AcceptDeps, h: HandoffToAccept): Promise<Accepted> {
  const handoffId = newId();
  const deliveries = h.planned.map((p) => ({
    id: newId(),
    channel: p.channel,
    recipient: p.recipient,
  }));
  const prepared = h.prepare ? await h.prepare({ handoffId, deliveries }) : undefined;
  if (prepared && 'replay' in prepared) return { outcome: 'replay', responseBody: prepared.replay };
  const body: AcceptedHandoff = {
    handoff_id: handoffId,
    tenant: h.tenant,
    event_type: h.eventType,
    reference: h.reference,
    status: 'pending',
    deliveries: deliveries.map((d) => ({
      delivery_id: d.id,
      channel: d.channel,
      recipient: d.recipient,
      status: 'pending' as const,
    })),
  };
  const mediaRefs = prepared?.mediaRefs;
  const traceparent = prepared?.traceparent !== undefined ? prepared.traceparent : h.traceparent;
  const result = await acceptHandoff(deps.db, {
    clientId: h.clientId,
    idempotencyKey: h.idempotencyKey,
    requestHash: h.requestHash,
    responseBody: JSON.stringify(body),
    handoffId,
    tenant: h.tenant,
    eventType: h.eventType,
    reference: h.reference,
    callbackUrl: h.callbackUrl,
    messages: h.messages,
    deliveries,
    ...(mediaRefs ? { mediaRefs } : {}),
    quota: h.quota,
    ...(traceparent !== undefined ? { traceparent } : {}),
  });
  if (result.outcome === 'replay') return result;
  // After the commit: a lost wake-up is re-sent by the sweeper (senders) or the feed's poll.
  wakeSenders(
    deps.nc,
    deliveries.map((d) => ({
      ...d,
      clientId: h.clientId,
      tenant: h.tenant,
      eventType: h.eventType,
    })),
    deps.logger,
  );
  wakeFeed(deps.nc);
  return { outcome: 'created', responseBody: result.responseBody, handoffId, deliveries };
}
