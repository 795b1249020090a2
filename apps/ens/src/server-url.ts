import type { Config } from '@ens/core';
import { runningServes } from './serve-registry.ts';

/** Where an `ens` command reaches the API, and how it was chosen (said on stderr). */
export interface ServerUrl {
  url: string;
  source: string;
}

/**
 * The URL a client on this machine reaches a server listening on `host`:`port` at: a wildcard
 * address is reached on loopback, an IPv6 address goes in brackets.
 */
export function urlForListener(host: string, port: number): string {
  const reach = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${reach.includes(':') ? `[${reach}]` : reach}:${port}`;
}

/**
 * Finds the API as the operator commands find the database: `--url`, then ENS_URL, then the
 * `ens serve` running on the same ENS_DATA_DIR (its note says where it listens, so a server
 * started with PORT=18580 is found from a shell without it), and last http://HOST:PORT of this
 * shell's own configuration.
 */
export async function findServerUrl(config: Config, flag: string | undefined): Promise<ServerUrl> {
  if (flag !== undefined) return { url: trim(flag), source: '--url' };
  if (config.url !== undefined) return { url: trim(config.url), source: 'ENS_URL' };
  const serve = (await runningServes()).find((s) => s.dataDir === config.dataDir && s.url);
  if (serve?.url)
    return {
      url: serve.url,
      source: `the ens serve running on ENS_DATA_DIR=${config.dataDir} (pid ${serve.pid})`,
    };
  return {
    url: urlForListener(config.host, config.port),
    source: `HOST and PORT (no ens serve with the api role runs on ENS_DATA_DIR=${config.dataDir})`,
  };
}

const trim = (url: string) => url.replace(/\/+$/, '');
