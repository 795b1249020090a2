/**
 * Peer child "Fastify + pg": the minimal service a team would write to take the same request ENS
 * takes: Fastify validates the body, one INSERT (autocommit: one transaction, durably committed
 * before the 202) through a pg Pool, nothing else. The anchor for ENS's accepting.
 *
 * Environment: PEER_DATABASE_URL, PEER_SCHEMA, PEER_PG_POOL (pool size).
 */
import pg from 'pg';
import { startIntake, serveUntilTold } from './intake.ts';
import { peerSetting } from './outcome.ts';

const schema = peerSetting('PEER_SCHEMA');
const db = new pg.Pool({
  connectionString: peerSetting('PEER_DATABASE_URL'),
  max: Number(peerSetting('PEER_PG_POOL')),
  application_name: 'peer-fastify-pg',
});
// An idle connection dropped by the server is replaced on next use; say so rather than crash.
db.on('error', (err) => process.stderr.write(`pg pool: ${err.message}\n`));

const intake = await startIntake(async (body) => {
  const m = body.messages[0]!;
  await db.query(
    `INSERT INTO ${schema}.messages (tenant, event_type, channel, recipients, body) VALUES ($1, $2, $3, $4, $5)`,
    [body.tenant, body.event_type, m.channel, m.recipients, m.content.body],
  );
  return m.recipients.length;
});

serveUntilTold(intake.port, async () => {
  await intake.close();
  await db.end();
});
