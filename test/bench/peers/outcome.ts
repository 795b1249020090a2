/**
 * What a peer's worker does per job, the same for every peer: "send" through a no-op provider that
 * behaves like ENS's sandbox on success (answers at once with a provider message id), then record
 * the outcome durably with one INSERT (its own committed transaction, fsync on) in PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';

export interface SendJob {
  run: string;
  channel: string;
  recipient: string;
  text: string;
}

/** The sandbox provider's success path: no I/O, a fresh provider message id. */
export function sendNoop(_job: SendJob): { providerMessageId: string } {
  return { providerMessageId: `sandbox-${randomUUID()}` };
}

/**
 * Sends and records one job. The primary key on job_id with DO NOTHING makes a retried job
 * (the queue redelivers after a crash between INSERT and its own completion) record once.
 */
export async function sendAndRecord(
  db: pg.Pool | pg.PoolClient,
  schema: string,
  jobId: string,
  job: SendJob,
): Promise<void> {
  const { providerMessageId } = sendNoop(job);
  await db.query(
    `INSERT INTO ${schema}.outcomes (job_id, run, channel, recipient, status, provider_message_id) VALUES ($1, $2, $3, $4, 'sent', $5)
     ON CONFLICT (job_id) DO NOTHING`,
    [jobId, job.run, job.channel, job.recipient, providerMessageId],
  );
}

/** Settings the parent passes to a peer child in its environment. */
export function peerSetting(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`peer child: ${name} is not set`);
  return v;
}
