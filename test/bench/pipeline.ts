import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { connect } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { statusCounts, waitNoPending } from './drain.ts';
import { ensPool, handoffBody, handoffId, mapLimit, phones, postHandoff } from './http.ts';
import { progress, wallMs } from './log.ts';

export interface RawPipelineResult {
  n: number;
  ms: number;
  rate: number;
}

/** Publishes in chunks with this many in flight, as ENS's wake-up publisher does. */
const PUBLISH_IN_FLIGHT = 512;

/**
 * Raw baseline: a work-queue stream on the same NATS, N small messages (a uuid each, like ENS's
 * wake-ups) published with 512 in flight while a durable pull consumer (consume(), library
 * defaults) acks them. Rate = N / (first publish → last ack).
 */
export async function rawPipeline(natsUrl: string, n: number): Promise<RawPipelineResult> {
  const nc = await connect({ servers: natsUrl, name: 'bench-raw' });
  const stream = 'BENCH_RAW';
  const subject = 'bench.raw';
  const jsm = await jetstreamManager(nc);
  try {
    await jsm.streams.delete(stream).catch(() => {});
    await jsm.streams.add({
      name: stream,
      subjects: [subject],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
    });
    await jsm.consumers.add(stream, {
      durable_name: 'bench',
      filter_subject: subject,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_ack_pending: 10_000,
    });
    const js = jetstream(nc);
    const consumer = await js.consumers.get(stream, 'bench');
    const messages = await consumer.consume();
    let acked = 0;
    let lastAck = 0;
    const consumed = (async () => {
      for await (const m of messages) {
        m.ack();
        if (++acked === n) {
          lastAck = wallMs();
          break;
        }
      }
    })();
    const payloads = Array.from({ length: n }, () => randomUUID());
    const t0 = wallMs();
    for (let i = 0; i < n; i += PUBLISH_IN_FLIGHT) {
      await Promise.all(
        payloads.slice(i, i + PUBLISH_IN_FLIGHT).map((p) => js.publish(subject, p)),
      );
    }
    await consumed;
    await nc.flush();
    const ms = lastAck - t0;
    return { n, ms, rate: n / (ms / 1000) };
  } finally {
    await jsm.streams.delete(stream).catch(() => {});
    await nc.close();
  }
}

export interface EnsPipelineResult {
  n: number;
  handoffs: number;
  /** First POST → every delivery sent. */
  ms: number;
  rate: number;
  /** First POST → last 202. */
  acceptMs: number;
  statuses: Record<string, number>;
  non202: Record<string, number>;
}

/**
 * ENS: `handoffs` × `perHandoff` sms deliveries (sandbox), POSTed 8 at a time. Rate = N / (first
 * POST → the poll that finds no delivery pending). ENS must be idle before this starts.
 */
export async function ensPipeline(
  baseUrl: string,
  token: string,
  db: pg.Pool,
  handoffs: number,
  perHandoff: number,
  label = 'pipeline',
  tenant = 'bench',
): Promise<EnsPipelineResult> {
  const bodies = Array.from({ length: handoffs }, (_, i) =>
    handoffBody(phones(perHandoff, i * perHandoff), { eventType: label, tenant }),
  );
  const p = ensPool(baseUrl, 8);
  const non202: Record<string, number> = {};
  try {
    const t0 = wallMs();
    const results = await mapLimit(bodies, 8, (b) => postHandoff(p.pool, token, b));
    const acceptMs = wallMs() - t0;
    const ids: string[] = [];
    for (const r of results) {
      if (r.status === 202) ids.push(handoffId(r));
      else non202[r.status] = (non202[r.status] ?? 0) + 1;
    }
    if (ids.length < handoffs)
      progress(
        `${label}: ${handoffs - ids.length} handoffs were not accepted: ${JSON.stringify(non202)}`,
      );
    const done = await waitNoPending(db, label);
    const ms = done - t0;
    const statuses = await statusCounts(db, ids);
    const n = ids.length * perHandoff;
    if ((statuses.sent ?? 0) !== n)
      progress(`${label}: expected ${n} sent, found ${JSON.stringify(statuses)}`);
    return {
      n,
      handoffs: ids.length,
      ms,
      rate: (statuses.sent ?? 0) / (ms / 1000),
      acceptMs,
      statuses,
      non202,
    };
  } finally {
    await p.close();
  }
}
