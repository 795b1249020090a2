import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { MediaStore } from './media-store.ts';

const KEY = /^sha256-[0-9a-f]{64}$/;

/**
 * Content-addressed files under one directory: the key is the bytes' SHA-256, so a retried
 * request stores nothing new, and a key can never be used to read outside the directory.
 */
export class DirectoryMediaStore implements MediaStore {
  constructor(private readonly dir: string) {}

  async put(bytes: Buffer, mediaType: string): Promise<string> {
    const key = `sha256-${createHash('sha256').update(bytes).digest('hex')}`;
    const file = path.join(this.dir, key.slice(7, 9), key);
    await mkdir(path.dirname(file), { recursive: true });
    // Write then rename so a reader never sees half a file.
    const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(tmp, bytes);
    await writeFile(`${tmp}.type`, mediaType);
    await rename(`${tmp}.type`, `${file}.type`);
    await rename(tmp, file);
    return key;
  }

  async get(key: string): Promise<{ bytes: Buffer; mediaType: string }> {
    if (!KEY.test(key)) throw new Error(`not a media key: ${key}`);
    const file = path.join(this.dir, key.slice(7, 9), key);
    const [bytes, mediaType] = await Promise.all([readFile(file), readFile(`${file}.type`, 'utf8')]);
    return { bytes, mediaType };
  }
}
