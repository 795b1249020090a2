import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { schemaSource } from './schema-source.ts';

/**
 * Regenerates src/schema.d.ts from a running ENS's document:
 *   npm run generate -w @ens/client -- http://127.0.0.1:8080
 * Run it against an ENS with the default providers (the sandbox): provider webhook routes are not
 * part of the client.
 */
const base = process.argv[2] ?? process.env.ENS_URL ?? 'http://127.0.0.1:8080';
const res = await fetch(new URL('/docs/json', base));
if (!res.ok) {
  console.error(`GET ${res.url} answered ${res.status}: is ENS running there?`);
  process.exit(1);
}
const out = fileURLToPath(new URL('../src/schema.d.ts', import.meta.url));
await writeFile(out, await schemaSource((await res.json()) as object));
console.error(`wrote ${out}`);
