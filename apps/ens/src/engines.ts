import path from 'node:path';
import type { Config } from '@ens/core';
import { startNats, startPostgres } from '@ens/local-engines';
import { readEnginesFile } from './engines-file.ts';
import { UsageError } from './output.ts';
import { runningServes } from './serve-registry.ts';

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
export async function resolveEngines(
  config: Config,
  opts: {
    needNats: boolean;
    start: boolean;
    log?: (line: string) => void;
    /**
     * For an operator command (not `serve`): say on stderr which database it uses, and refuse to
     * start engines of its own while another `ens serve` runs on another data directory, unless
     * `ownEngines` (--own-engines).
     */
    operatorCommand?: { ownEngines: boolean };
  },
): Promise<Engines> {
  const running =
    config.databaseUrl && (config.natsUrl || !opts.needNats)
      ? null
      : await readEnginesFile(config.dataDir);
  let databaseUrl = config.databaseUrl ?? running?.databaseUrl;
  let natsUrl = config.natsUrl ?? running?.natsUrl;
  const say = (line: string) => opts.operatorCommand && process.stderr.write(`ens: ${line}\n`);
  if (config.databaseUrl)
    say(`using the database at DATABASE_URL (${safeUrl(config.databaseUrl)})`);
  else if (running)
    say(
      `using the database of the ens serve running on ENS_DATA_DIR=${config.dataDir} (pid ${running.pid})`,
    );
  else if (opts.operatorCommand)
    await refuseSecondEngines(config.dataDir, opts.operatorCommand.ownEngines);
  const stops: (() => Promise<void>)[] = [];
  try {
    if (!databaseUrl) {
      say(
        `no ens serve runs on ENS_DATA_DIR=${config.dataDir}: starting PostgreSQL under it for this command; it stops when the command ends`,
      );
      const pg = await startPostgres({
        dataDir: path.join(config.dataDir, 'postgres'),
        onLog: opts.log,
      });
      stops.push(() => pg.stop());
      databaseUrl = pg.url;
    }
    if (!natsUrl && opts.needNats) {
      const nats = await startNats({
        storeDir: path.join(config.dataDir, 'nats'),
        onLog: opts.log,
      });
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

/**
 * The URL without its password, for a message; libpq's multi-host form too (URL cannot read it).
 */
function safeUrl(url: string): string {
  const m = /^([a-z]+:\/\/)([^@/?]*@)?(.*)$/i.exec(url);
  if (!m) return 'not a URL';
  const [, scheme, userinfo = '', rest] = m;
  const colon = userinfo.indexOf(':');
  return `${scheme}${colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:***@`}${rest}`;
}

/**
 * An operator command without DATABASE_URL, and no serve on its data directory, would start a
 * PostgreSQL of its own. When an `ens serve` runs on another data directory on this machine, that
 * is almost always a shell that lacks the server's ENS_DATA_DIR: the command would change a
 * database the server never reads. Refused, with the fix, unless asked for.
 */
async function refuseSecondEngines(dataDir: string, ownEngines: boolean): Promise<void> {
  if (ownEngines) return;
  const other = (await runningServes()).find((s) => s.dataDir !== dataDir);
  if (!other) return;
  const how = other.ownEngines
    ? `set ENS_DATA_DIR=${other.dataDir} as that server has`
    : 'set DATABASE_URL as that server has';
  throw new UsageError(
    `ens serve (pid ${other.pid}) runs with ENS_DATA_DIR=${other.dataDir}, and this command would start a second PostgreSQL under ${dataDir} that the server never reads: ${how}, or pass --own-engines to use ${dataDir} on purpose`,
  );
}
