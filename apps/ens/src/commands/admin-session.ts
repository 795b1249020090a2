import pino from 'pino';
import { CallbackStore, ClientStore, MASTER_KEY_MISMATCH, migrate, type Config } from '@ens/core';
import {
  createPool,
  resolveMasterKey,
  SecretBox,
  connectNats,
  ensureTopology,
  type CallbackWakeup,
  type Db,
} from '@ens/core/internal';
import { resolveEngines } from '../engines.ts';
import { operatorOptions } from '../operator-options.ts';
import { UsageError } from '../output.ts';

export interface AdminSession {
  db: Db;
  clients: ClientStore;
  /** The callbacks, to read (dead letters); replays go through replayCallbacks. */
  callbacks: CallbackStore;
  /**
   * Puts dead letters back in the queue; the store wakes the callbacks role after its commit.
   * Without NATS, the role's sweeper picks the work up within a minute.
   */
  replayCallbacks(sel: { ids?: string[]; clientId?: string }): Promise<CallbackWakeup[]>;
}

/**
 * Opens what an operator command needs (the database, and NATS when reachable) and closes it
 * afterwards. Logs go to stderr so stdout carries only the command's JSON.
 */
export async function withAdminSession<T>(
  config: Config,
  fn: (s: AdminSession) => Promise<T>,
): Promise<T> {
  const engines = await resolveEngines(config, {
    needNats: false,
    start: true,
    operatorCommand: operatorOptions,
  });
  const db = createPool(engines.databaseUrl, { max: 2, applicationName: 'ens-cli' });
  const logger = pino({ level: 'warn' }, pino.destination(2));
  try {
    await migrate(db);
    const clients = new ClientStore(
      db,
      new SecretBox(await resolveMasterKey(config.masterKey, config.dataDir)),
    );
    if (!(await clients.masterKeyOpensStoredSecrets())) throw new UsageError(MASTER_KEY_MISMATCH);
    const session: AdminSession = {
      db,
      clients,
      callbacks: new CallbackStore(db),
      async replayCallbacks(sel) {
        // This command's own store, with the NATS connection it wakes through when one is
        // reachable.
        const nc = engines.natsUrl
          ? await connectNats(engines.natsUrl, 'ens-cli').catch(() => null)
          : null;
        try {
          if (nc) await ensureTopology(nc, config.natsReplicas);
          return await new CallbackStore(db, db, nc ? { nc, logger } : null).replay(sel);
        } finally {
          await nc?.drain().catch(() => {});
        }
      },
    };
    return await fn(session);
  } finally {
    await db.end();
    await engines.stop();
  }
}
