// Where the suite's loader keeps what it compiles: hooks.mjs its TypeScript output and typebox
// bundles, register.mjs V8's compile cache. One directory under node_modules, which `npm ci`
// empties.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const cacheDir = path.join(root, 'node_modules', '.cache', 'ens-test-loader');
