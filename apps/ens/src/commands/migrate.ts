import { migrate, type Config } from '@ens/core';
import { createPool } from '@ens/core/internal';
import { resolveEngines } from '../engines.ts';
import { operatorOptions } from '../operator-options.ts';

/** `ens migrate`: applies pending SQL migrations and prints what it applied. */
export async function migrateCommand(config: Config): Promise<void> {
  const engines = await resolveEngines(config, {
    needNats: false,
    start: true,
    operatorCommand: operatorOptions,
  });
  const db = createPool(engines.databaseUrl, { max: 2, applicationName: 'ens-migrate' });
  try {
    const applied = await migrate(db);
    process.stdout.write(`${JSON.stringify({ applied })}\n`);
  } finally {
    await db.end();
    await engines.stop();
  }
}
