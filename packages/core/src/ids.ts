import { v7 } from 'uuid';

/** Time-ordered ids (UUIDv7) keep inserts at the right edge of the primary-key index. */
export function newId(): string {
  return v7();
}
