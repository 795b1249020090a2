import { randomUUID } from 'node:crypto';
import { migrate } from '@ens/core';
import { createPool, type Db } from '@ens/core/internal';
import { startTestEngines } from './engines.ts';

/*
 * The record alone, for tests of core's stores on a real PostgreSQL: a migrated database with one
 * client and its tenant 't', and pending sms deliveries written as the accept writes them.
 */

/** A migrated database of its own, with the client `clientId` and its tenant 't'. */
export async function migratedRecord(
  t: { teardown(fn: () => unknown): void },
  clientId: string,
): Promise<Db> {
  const engines = await startTestEngines(t);
  const db = createPool(engines.databaseUrl, { max: 4 });
  t.teardown(() => db.end());
  await migrate(db);
  await db.query(`INSERT INTO clients (id, name, secret_hash) VALUES ($1, $1, 'x')`, [clientId]);
  await db.query(`INSERT INTO tenants (client_id, id) VALUES ($1, 't')`, [clientId]);
  return db;
}

/** A pending sms delivery of `clientId` (tenant 't') in a handoff of its own; returns its id. */
export async function pendingSms(db: Db, clientId: string, recipient: string): Promise<string> {
  const handoff = randomUUID();
  const id = randomUUID();
  await db.query(
    `INSERT INTO handoffs (id, client_id, tenant, event_type, messages)
     VALUES ($1, $2, 't', 'e', '{"sms":{"body":"x"}}')`,
    [handoff, clientId],
  );
  await db.query(
    `INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, channel, recipient)
     VALUES ($1, $2, $3, 't', 'e', 'sms', $4)`,
    [id, handoff, clientId, recipient],
  );
  return id;
}
