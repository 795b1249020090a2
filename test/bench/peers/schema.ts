import pg from 'pg';

/**
 * The peers' own database on the bench's PostgreSQL, so they never touch ENS's tables: one schema
 * per peer (graphile-worker also creates its graphile_worker schema there). Each run of a peer
 * starts from fresh tables, as ENS's runs start from an empty record.
 */
export const PEERS_DATABASE = 'bench_peers';

export async function createPeersDatabase(databaseUrl: string): Promise<string> {
  const admin = new pg.Client({ connectionString: databaseUrl });
  admin.on('error', () => {});
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${PEERS_DATABASE}`);
    await admin.query(`CREATE DATABASE ${PEERS_DATABASE}`);
  } finally {
    await admin.end();
  }
  const url = new URL(databaseUrl);
  url.pathname = `/${PEERS_DATABASE}`;
  return url.toString();
}

/**
 * Drops and recreates a peer's schema with the table it writes (and graphile-worker's own schema).
 */
export async function resetPeerSchema(
  db: pg.Pool,
  schema: string,
  table: 'messages' | 'outcomes',
): Promise<void> {
  await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await db.query('DROP SCHEMA IF EXISTS graphile_worker CASCADE');
  await db.query(`CREATE SCHEMA ${schema}`);
  await db.query(table === 'messages' ? messagesDdl(schema) : outcomesDdl(schema));
}

/** Fastify + pg: one row per request. */
function messagesDdl(schema: string): string {
  return `CREATE TABLE ${schema}.messages (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant text NOT NULL,
            event_type text NOT NULL,
            channel text NOT NULL,
            recipients text[] NOT NULL,
            body text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
          )`;
}

/** The queue peers: one row per job, written by outcome.ts's sendAndRecord. */
function outcomesDdl(schema: string): string {
  return `CREATE TABLE ${schema}.outcomes (
            job_id text PRIMARY KEY,
            run text NOT NULL,
            channel text NOT NULL,
            recipient text NOT NULL,
            status text NOT NULL,
            provider_message_id text,
            sent_at timestamptz NOT NULL DEFAULT now()
          )`;
}
