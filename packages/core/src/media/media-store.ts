import { createHash } from 'node:crypto';

/** A stored object as a listing sees it. */
export interface StoredMedia {
  key: string;
  /** When the object was last written. */
  modifiedAt: Date;
}

/**
 * Where inline images live after receipt: a directory or an S3-compatible bucket. Keys are the
 * bytes' SHA-256 (`mediaKey`), so the same image stored twice is one object.
 */
export interface MediaStore {
  /** Stores bytes under their key and returns it. Storing the same bytes twice is harmless. */
  put(bytes: Buffer, mediaType: string, key?: string): Promise<string>;
  get(key: string): Promise<{ bytes: Buffer; mediaType: string }>;
  /** Every stored object; the collector walks it to find objects nothing uses. */
  list(): AsyncIterable<StoredMedia>;
  /** Removes an object; removing one that is not there is not an error. */
  delete(key: string): Promise<void>;
  /** Throws when the store cannot be reached (start-up and /readyz ask). */
  check?(): Promise<void>;
  close?(): void;
}

export const MEDIA_KEY = /^sha256-[0-9a-f]{64}$/;

/** The key bytes are stored under: `sha256-<hex>`. */
export function mediaKey(bytes: Buffer): string {
  return `sha256-${createHash('sha256').update(bytes).digest('hex')}`;
}
