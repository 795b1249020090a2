import type { LookupFunction } from 'node:net';
import { Pool } from 'undici';

/*
 * The transport half of the outbound guard: connections that can only reach an address the guard
 * checked. Keep-alive pools are keyed by origin AND pinned address, so a reused connection always
 * goes to an address checked for that same hostname, and a later request whose DNS answer differs
 * gets a fresh connection to the new (re-checked) address instead of riding an old one.
 */

// Pools are shared by requests with different deadlines; each request's deadline is its abort
// signal, so this only bounds a dangling connect.
const CONNECT_TIMEOUT_MS = 60_000;
// Bounded so that many distinct client-supplied hosts cannot grow memory without limit.
const MAX_POOLS = 256;

/** Insertion-ordered so the first key is the least recently used. */
const pools = new Map<string, Pool>();

/** A keep-alive pool for `url`'s origin whose every connection goes to `address`. */
export function pinnedDispatcher(url: URL, address: string, family: 4 | 6): Pool {
  const key = `${url.origin} ${address}`;
  let pool = pools.get(key);
  if (pool !== undefined) {
    pools.delete(key);
    if (pool.closed || pool.destroyed) pool = undefined;
  }
  if (pool === undefined) {
    pool = new Pool(url.origin, {
      connect: { lookup: pinnedLookup(url.hostname, address, family), timeout: CONNECT_TIMEOUT_MS },
    });
  }
  pools.set(key, pool);
  while (pools.size > MAX_POOLS) {
    const [oldestKey, oldest] = pools.entries().next().value as [string, Pool];
    pools.delete(oldestKey);
    // close() lets requests already queued on it finish.
    oldest.close().catch(() => {});
  }
  return pool;
}

/**
 * Closes every pooled keep-alive connection (waiting for requests in flight). For graceful
 * shutdown and tests; later requests open new pools.
 */
export async function closeOutboundConnections(): Promise<void> {
  const all = [...pools.values()];
  pools.clear();
  await Promise.allSettled(all.map((pool) => pool.close()));
}

/**
 * A resolver that only ever answers the checked address, so a connection cannot reach an
 * address the guard did not see. (IP-literal origins never call it.)
 */
function pinnedLookup(hostname: string, address: string, family: 4 | 6): LookupFunction {
  return (host, options, callback) => {
    if (host !== hostname) {
      const err: NodeJS.ErrnoException = new Error(`pinned resolver refuses ${host}`);
      err.code = 'ENOTFOUND';
      callback(err, '');
      return;
    }
    // Node >= 20 asks for all addresses when autoSelectFamily (happy eyeballs) is on.
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
}
