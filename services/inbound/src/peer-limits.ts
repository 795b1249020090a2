import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

/**
 * What one remote peer may ask of the inbound role, so that a flood from one address cannot crowd
 * out the relays whose bounces matter: a budget of connections plus messages per minute (counted
 * with rate-limiter-flexible, the library the API's limits use) and a cap on the connections it
 * holds open at once. An IPv6 peer counts by its /64, the block one host is usually given, so it
 * cannot dodge the budget by rotating addresses. The counts are per process: with ENS_PROCESSES
 * above 1 a peer whose connections land on several processes gets each one's budget.
 */
export class PeerLimits {
  readonly #budget: RateLimiterMemory;
  readonly #open = new Map<string, number>();

  constructor(private readonly o: { perMinute: number; maxConnections: number }) {
    this.#budget = new RateLimiterMemory({ points: o.perMinute, duration: 60 });
  }

  /**
   * Admits a new connection from `address`; on 'ok' the caller must call released() when it closes.
   */
  async admitConnection(address: string): Promise<'ok' | 'rate_limited' | 'too_many_connections'> {
    const peer = peerKey(address);
    if ((this.#open.get(peer) ?? 0) >= this.o.maxConnections) return 'too_many_connections';
    if (!(await this.#spend(peer))) return 'rate_limited';
    this.#open.set(peer, (this.#open.get(peer) ?? 0) + 1);
    return 'ok';
  }

  released(address: string): void {
    const peer = peerKey(address);
    const n = (this.#open.get(peer) ?? 1) - 1;
    if (n <= 0) this.#open.delete(peer);
    else this.#open.set(peer, n);
  }

  /** Admits one more message (MAIL FROM) from `address`. */
  admitMessage(address: string): Promise<boolean> {
    return this.#spend(peerKey(address));
  }

  async #spend(peer: string): Promise<boolean> {
    try {
      await this.#budget.consume(peer, 1);
      return true;
    } catch (e) {
      if (e instanceof RateLimiterRes) return false;
      throw e;
    }
  }
}

/** IPv4 as is (an IPv4-mapped IPv6 address as its IPv4); IPv6 as its /64 prefix. */
export function peerKey(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (!address.includes(':')) return address;
  const groups = ipv6Groups(address.replace(/%.*$/, ''));
  if (!groups) return address.toLowerCase();
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

function ipv6Groups(a: string): string[] | null {
  const halves = a.split('::');
  if (halves.length > 2) return null;
  const left = halves[0] ? halves[0].split(':') : [];
  const right = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const fill = halves.length === 2 ? 8 - left.length - right.length : 0;
  if (fill < 0) return null;
  const groups = [...left, ...Array<string>(fill).fill('0'), ...right];
  return groups.length === 8 && groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g)) ? groups : null;
}
