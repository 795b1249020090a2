import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { MEDIA_KEY, mediaKey, type MediaStore, type StoredMedia } from './media-store.ts';

/**
 * A write that a crash interrupted leaves one of these; the collector removes it like an object.
 */
const TMP = /^(sha256-[0-9a-f]{64})\.\d+\.\d+\.tmp(\.type)?$/;

/**
 * Content-addressed files under one directory: the key is the bytes' SHA-256, so a retried
 * request stores nothing new, and a key can never be used to read outside the directory.
 */
export class DirectoryMediaStore implements MediaStore {
  constructor(private readonly dir: string) {}

  async put(bytes: Buffer, mediaType: string, key = mediaKey(bytes)): Promise<string> {
    const file = this.file(key);
    await mkdir(path.dirname(file), { recursive: true });
    // Write then rename so a reader never sees half a file. Rewriting an existing object also
    // renews its time, as S3's PutObject would.
    const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(tmp, bytes);
    await writeFile(`${tmp}.type`, mediaType);
    await rename(`${tmp}.type`, `${file}.type`);
    await rename(tmp, file);
    return key;
  }

  async get(key: string): Promise<{ bytes: Buffer; mediaType: string }> {
    const file = this.file(key);
    const [bytes, mediaType] = await Promise.all([
      readFile(file),
      readFile(`${file}.type`, 'utf8'),
    ]);
    return { bytes, mediaType };
  }

  async *list(): AsyncIterable<StoredMedia> {
    for (const shard of await readdir(this.dir).catch(() => [])) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of await readdir(path.join(this.dir, shard)).catch(() => [])) {
        // A leftover temporary file is listed under the key it was for: removing that key removes
        // it.
        const key = MEDIA_KEY.test(name) ? name : TMP.exec(name)?.[1];
        if (key === undefined) continue;
        const s = await stat(path.join(this.dir, shard, name)).catch(() => null);
        if (s) yield { key, modifiedAt: s.mtime };
      }
    }
  }

  async delete(key: string): Promise<void> {
    const file = this.file(key);
    const leftovers = (await readdir(path.dirname(file)).catch(() => [])).filter(
      (n) => TMP.exec(n)?.[1] === key,
    );
    await Promise.all(
      [file, `${file}.type`, ...leftovers.map((n) => path.join(path.dirname(file), n))].map((f) =>
        rm(f, { force: true }),
      ),
    );
  }

  private file(key: string): string {
    if (!MEDIA_KEY.test(key)) throw new Error(`not a media key: ${key}`);
    return path.join(this.dir, key.slice(7, 9), key);
  }
}
