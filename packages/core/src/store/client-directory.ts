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
  /** The session that listens, once its LISTEN has succeeded; the cache is used only then. */
  #listener: Listening | null = null;
  #closed = false;

  constructor(
    private readonly db: Db,
    private readonly store: ClientStore,
  ) {}

  async start(): Promise<void> {
    await this.#listen();
  }

  /*
   * Every client this checks out is released exactly once, whatever happens first: its LISTEN
   * failing, its connection dying, or close() (which may come while a connect is under way). A
   * client left checked out makes the pool's end() wait forever: the api role's stop hung so when
   * PostgreSQL came back just before it (test/fault/client-directory-pg-away.test.ts).
   */
  async #listen(): Promise<void> {
    if (this.#closed) return;
    let client: pg.PoolClient;
    try {
      client = await this.db.connect();
    } catch {
      this.#again(1000);
      return;
    }
    const l: Listening = { client, released: false, lost: () => {} };
    l.lost = () => {
      if (this.#listener === l) {
        this.#listener = null;
        this.#cache.clear();
      }
      if (this.#release(l, true)) this.#again(500);
    };
    client.on('notification', (n) => {
      if (n.payload && this.#listener === l) this.#cache.delete(n.payload);
    });
    client.on('error', l.lost);
    client.on('end', l.lost);
    if (this.#closed) {
      this.#release(l, true);
      return;
    }
    try {
      await client.query(`LISTEN ${CLIENT_CHANGES_CHANNEL}`);
    } catch {
      l.lost();
      return;
    }
    if (l.released) return;
    // Closed while LISTEN was on its way: the session listens, so it is not given back to the pool.
    if (this.#closed) this.#release(l, true);
    else this.#listener = l;
  }

  #again(ms: number): void {
    if (!this.#closed) setTimeout(() => void this.#listen(), ms).unref();
  }

  /** Releases the client once (`destroy`: its connection is closed); false when it already was. */
  #release(l: Listening, destroy: boolean): boolean {
    if (l.released) return false;
    l.released = true;
    l.client.off('error', l.lost);
    l.client.off('end', l.lost);
    l.client.removeAllListeners('notification');
    // An error on the way back to the pool must not become an uncaught one.
    if (destroy) l.client.on('error', () => {});
    l.client.release(destroy || undefined);
    return true;
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
    const l = this.#listener;
    this.#listener = null;
    if (!l) return;
    const unlistened = await l.client.query(`UNLISTEN ${CLIENT_CHANGES_CHANNEL}`).then(
      () => true,
      () => false,
    );
    this.#release(l, !unlistened);
  }
}

interface Listening {
  client: pg.PoolClient;
  released: boolean;
  /** Called when the session's connection fails; releases the client and listens anew. */
  lost: () => void;
}
