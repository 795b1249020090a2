/**
 * Where inline images live after receipt. The directory backend ships now; an S3-compatible one
 * implements the same two calls.
 */
export interface MediaStore {
  /** Stores bytes and returns the key to fetch them by. Storing the same bytes twice is harmless. */
  put(bytes: Buffer, mediaType: string): Promise<string>;
  get(key: string): Promise<{ bytes: Buffer; mediaType: string }>;
  /** Throws when the store cannot be reached (start-up and /readyz ask). */
  check?(): Promise<void>;
  close?(): void;
}
