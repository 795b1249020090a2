import pino from 'pino';
import { CallbackStore, ClientStore, MASTER_KEY_MISMATCH, migrate, type Config } from '@ens/core';
import { createPool, resolveMasterKey, SecretBox, connectNats, ensureTopology, wakeCallbacks, type CallbackWakeup, type Db } from '@ens/core/internal';
import { resolveEngines } from '../engines.ts';
import { operatorOptions } from '../operator-options.ts';
import { UsageError } from '../output.ts';

export interface AdminSession {
  db: Db;
  clients: ClientStore;
  callbacks: CallbackStore;
  /** Wakes the callbacks role; without NATS, the role's sweeper picks the work up within a minute. */
  wakeCallbacks(callbacks: CallbackWakeup[]): Promise<void>;
}

/**
 * Opens what an operator command needs (the database, and NATS when reachable) and closes it
 * afterwards. Logs go to stderr so stdout carries only the command's JSON.
 */
export async function withAdminSession<T>(config: Config, fn: (s: AdminSession) => Promise<T>): Promise<T> {
  const engines = await resolveEngines(config, { needNats: false, start: true, operatorCommand: operatorOptions });
  const db = createPool(engines.databaseUrl, { max: 2, applicationName: 'ens-cli' });
  const logger = pino({ level: 'warn' }, pino.destination(2));
  try {
    await migrate(db);
    const clients = new ClientStore(db, new SecretBox(await resolveMasterKey(config.masterKey, config.dataDir)));
    if (!(await clients.masterKeyOpensStoredSecrets())) throw new UsageError(MASTER_KEY_MISMATCH);
    const session: AdminSession = {
      db,
      clients,
      callbacks: new CallbackStore(db),
      async wakeCallbacks(callbacks) {
        if (callbacks.length === 0 || !engines.natsUrl) return;
        const nc = await connectNats(engines.natsUrl, 'ens-cli').catch(() => null);
        if (!nc) return;
        try {
          await ensureTopology(nc, config.natsReplicas);
          wakeCallbacks(nc, callbacks, logger);
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
