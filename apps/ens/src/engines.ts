import path from 'node:path';
import type { Config } from '@ens/core';
import { startNats, startPostgres } from '@ens/local-engines';
import { readEnginesFile } from './engines-file.ts';

export interface Engines {
  databaseUrl: string;
  natsUrl: string | undefined;
  /** True when this process started an engine it must stop. */
  owned: boolean;
  stop(): Promise<void>;
}

/**
 * Finds the engines for this command: configured URLs first, then those of a running `ens serve`
 * on the same data directory, and otherwise (when `start` allows) starts PostgreSQL and
 * nats-server under ENS_DATA_DIR. Throws EngineMissingError naming the package to install.
 */
export async function resolveEngines(config: Config, opts: { needNats: boolean; start: boolean; log?: (line: string) => void }): Promise<Engines> {
  const running = config.databaseUrl && (config.natsUrl || !opts.needNats) ? null : await readEnginesFile(config.dataDir);
  let databaseUrl = config.databaseUrl ?? running?.databaseUrl;
  let natsUrl = config.natsUrl ?? running?.natsUrl;
  const stops: (() => Promise<void>)[] = [];
  try {
    if (!databaseUrl) {
      const pg = await startPostgres({ dataDir: path.join(config.dataDir, 'postgres'), onLog: opts.log });
      stops.push(() => pg.stop());
      databaseUrl = pg.url;
    }
    if (!natsUrl && opts.needNats) {
      const nats = await startNats({ storeDir: path.join(config.dataDir, 'nats'), onLog: opts.log });
      stops.push(() => nats.stop());
      natsUrl = nats.url;
    }
  } catch (e) {
    for (const s of stops.reverse()) await s().catch(() => {});
    throw e;
  }
  return {
    databaseUrl,
    natsUrl,
    owned: stops.length > 0,
    async stop() {
      for (const s of stops.reverse()) await s().catch(() => {});
    },
  };
}
