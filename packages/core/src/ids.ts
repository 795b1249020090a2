import { randomFillSync } from 'node:crypto';

/*
 * Time-ordered ids (UUIDv7, RFC 9562) keep inserts at the right edge of the primary-key index. Laid
 * out as the uuid package's v7 does it: 48-bit Unix milliseconds, then a 31-bit counter seeded at
 * random each millisecond and incremented within it (ids made in one process sort in the order they
 * were made), then 32 random bits. Random bytes come from a pool filled 4 KiB at a time: one call
 * into the CSPRNG per 512 ids instead of one per id, which cost more than everything else here.
 */
const POOL = Buffer.allocUnsafe(4096);
let poolAt = POOL.length;
let lastMs = -Infinity;
let seq = 0;

const HEX = Array.from({ length: 256 }, (_, i) => (i + 0x100).toString(16).slice(1));

/** Offset of 10 fresh random bytes in POOL. */
function random10(): number {
  if (poolAt + 10 > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += 10;
  return at;
}

export function newId(): string {
  const r = random10();
  const now = Date.now();
  if (now > lastMs) {
    seq = POOL.readUInt32BE(r) & 0x7fffffff;
    lastMs = now;
  } else {
    seq = (seq + 1) | 0;
    if (seq === 0) lastMs++; // 2^31 ids in one millisecond: borrow the next one
  }
  const ms = lastMs;
  const h = HEX;
  return (
    h[Math.floor(ms / 0x10000000000) & 0xff]! +
    h[Math.floor(ms / 0x100000000) & 0xff]! +
    h[Math.floor(ms / 0x1000000) & 0xff]! +
    h[Math.floor(ms / 0x10000) & 0xff]! +
    '-' +
    h[Math.floor(ms / 0x100) & 0xff]! +
    h[ms & 0xff]! +
    '-' +
    h[0x70 | ((seq >>> 28) & 0x0f)]! +
    h[(seq >>> 20) & 0xff]! +
    '-' +
    h[0x80 | ((seq >>> 14) & 0x3f)]! +
    h[(seq >>> 6) & 0xff]! +
    '-' +
    h[((seq << 2) & 0xff) | (POOL[r + 4]! & 0x03)]! +
    h[POOL[r + 5]!]! +
    h[POOL[r + 6]!]! +
    h[POOL[r + 7]!]! +
    h[POOL[r + 8]!]! +
    h[POOL[r + 9]!]!
  );
}
