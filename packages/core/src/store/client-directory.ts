import type pg from 'pg';
import type { Db } from '../db/pool.ts';
import { CLIENT_CHANGES_CHANNEL, type ClientRow, type ClientStore } from './clients.ts';

/**
 * A per-process cache of clients for the hot path (every /v2/ request and every callback). It
 * listens for change notifications so a disabled client is refused at once; while the listener is
 * down it does not cache at all, so no stale "enabled" answer can outlive a lost notification.
 */
export class ClientDirectory {
  readonly #cache = new Map<string, Promise<ClientRow | null>>();
  #listener: pg.PoolClient | null = null;
  #closed = false;

  constructor(
    private readonly db: Db,
    private readonly store: ClientStore,
  ) {}

  async start(): Promise<void> {
    await this.#listen();
  }

  async #listen(): Promise<void> {
    if (this.#closed) return;
    try {
      const c = await this.db.connect();
      c.on('notification', (n) => {
        if (n.payload) this.#cache.delete(n.payload);
      });
      c.on('error', () => this.#lost(c));
      c.on('end', () => this.#lost(c));
      await c.query(`LISTEN ${CLIENT_CHANGES_CHANNEL}`);
      this.#listener = c;
    } catch {
      setTimeout(() => void this.#listen(), 1000).unref();
    }
  }

  #lost(c: pg.PoolClient): void {
    if (this.#listener !== c) return;
    this.#listener = null;
    this.#cache.clear();
    c.release(true);
    setTimeout(() => void this.#listen(), 500).unref();
  }

  get(id: string): Promise<ClientRow | null> {
    if (this.#listener === null) return this.store.get(id);
    let hit = this.#cache.get(id);
    if (!hit) {
      hit = this.store.get(id);
      this.#cache.set(id, hit);
      hit.catch(() => this.#cache.delete(id));
    }
    return hit;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const c = this.#listener;
    this.#listener = null;
    if (c) {
      await c.query(`UNLISTEN ${CLIENT_CHANGES_CHANNEL}`).catch(() => {});
      c.release();
    }
  }
}
