import { readFile } from 'node:fs/promises';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';

export interface RedisInfo {
  version: string;
  /** Set when Redis runs on this machine, so its CPU can be read from /proc. */
  pid?: number;
  maxmemoryPolicy?: string;
}

/**
 * Redis at `url`, or why not: the BullMQ peer is skipped (with a row saying so) when it is
 * unreachable.
 */
export async function probeRedis(url: string): Promise<RedisInfo | { error: string }> {
  const r = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 2_000,
    retryStrategy: () => null,
  });
  r.on('error', () => {});
  try {
    await r.connect();
    await r.ping();
    const info = await r.info('server');
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
    const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
    const local =
      Number.isInteger(pid) &&
      (await readFile(`/proc/${pid}/comm`, 'utf8').then(
        (c) => c.includes('redis'),
        () => false,
      ));
    // BullMQ needs noeviction; the note shows what this Redis has.
    const policy = await r.config('GET', 'maxmemory-policy').then(
      (v) => (v as string[])[1],
      () => undefined,
    );
    return { version, ...(local ? { pid } : {}), ...(policy ? { maxmemoryPolicy: policy } : {}) };
  } catch (err) {
    return { error: (err as Error).message };
  } finally {
    r.disconnect();
  }
}

/** Removes every key of a BullMQ queue: the Redis is shared with other work on the machine. */
export async function obliterateQueue(url: string, name: string): Promise<void> {
  const conn = new Redis(url, { maxRetriesPerRequest: 1 });
  conn.on('error', () => {});
  const q = new Queue(name, { connection: conn });
  try {
    await q.obliterate({ force: true });
  } finally {
    await q.close();
    conn.disconnect();
  }
}
