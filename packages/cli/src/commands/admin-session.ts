import pino from 'pino';
import { CallbackStore, ClientStore, createPool, migrate, resolveMasterKey, SecretBox, connectNats, ensureTopology, wakeCallbacks, type Config, type Db } from '@ens/core';
import { resolveEngines } from '../engines.ts';
import { UsageError } from '../output.ts';

export interface AdminSession {
  db: Db;
  clients: ClientStore;
  callbacks: CallbackStore;
  /** Wakes the callbacks role; without NATS, the role's sweeper picks the work up within a minute. */
  wakeCallbacks(ids: string[]): Promise<void>;
}

/**
 * Opens what an operator command needs (the database, and NATS when reachable) and closes it
 * afterwards. Logs go to stderr so stdout carries only the command's JSON.
 */
export async function withAdminSession<T>(config: Config, fn: (s: AdminSession) => Promise<T>): Promise<T> {
  const engines = await resolveEngines(config, { needNats: false, start: true });
  const db = createPool(engines.databaseUrl, { max: 2, applicationName: 'ens-cli' });
  const logger = pino({ level: 'warn' }, pino.destination(2));
  try {
    await migrate(db);
    const box = new SecretBox(await resolveMasterKey(config.masterKey, config.dataDir));
    await checkMasterKey(db, box);
    const session: AdminSession = {
      db,
      clients: new ClientStore(db, box),
      callbacks: new CallbackStore(db),
      async wakeCallbacks(ids) {
        if (ids.length === 0 || !engines.natsUrl) return;
        const nc = await connectNats(engines.natsUrl, 'ens-cli').catch(() => null);
        if (!nc) return;
        try {
          await wakeCallbacks(await ensureTopology(nc), ids, logger);
        } finally {
          await nc.drain().catch(() => {});
        }
      },
    };
    return await fn(session);
  } finally {
    await db.end();
    await engines.stop();
  }
}

/**
 * Refuses to work with a master key that cannot open the callback secrets already stored. Without
 * ENS_MASTER_KEY the key lives in ENS_DATA_DIR, so a command run with another data directory than
 * the server's would otherwise seal new secrets that the server can never read.
 */
async function checkMasterKey(db: Db, box: SecretBox): Promise<void> {
  const { rows } = await db.query<{ sealed: string }>('SELECT callback_secret_enc AS sealed FROM clients WHERE callback_secret_enc IS NOT NULL LIMIT 1');
  if (!rows[0]) return;
  try {
    box.open(rows[0].sealed);
  } catch {
    throw new UsageError('this master key cannot open the callback secrets in the database; set ENS_MASTER_KEY or ENS_DATA_DIR as `ens serve` has them');
  }
}
