import type pg from 'pg';
import { statusCounts, waitNoPending } from './drain.ts';
import { ensPool, handoffBody, handoffId, phones, postHandoff } from './http.ts';
import { wallMs } from './log.ts';

export interface FanoutResult {
  recipients: number;
  bodyBytes: number;
  /** POST → 202. */
  acceptMs: number;
  /** POST → every delivery sent. */
  allSentMs: number;
  sendRate: number;
  statuses: Record<string, number>;
}

/** One handoff with `n` sms recipients. ENS must be idle before this starts. */
export async function ensFanout(
  baseUrl: string,
  token: string,
  db: pg.Pool,
  n: number,
): Promise<FanoutResult> {
  const body = handoffBody(phones(n), { eventType: 'fanout' });
  const p = ensPool(baseUrl, 1);
  try {
    const t0 = wallMs();
    const r = await postHandoff(p.pool, token, body);
    const acceptMs = wallMs() - t0;
    const id = handoffId(r);
    const done = await waitNoPending(db, 'fan-out');
    const allSentMs = done - t0;
    const statuses = await statusCounts(db, [id]);
    return {
      recipients: n,
      bodyBytes: Buffer.byteLength(body),
      acceptMs,
      allSentMs,
      sendRate: (statuses.sent ?? 0) / (allSentMs / 1000),
      statuses,
    };
  } finally {
    await p.close();
  }
}
