// The test suite's TypeScript loader: `node --import=./test/harness/loader/register.mjs`. tap gives
// it to every test file (package.json "tap" node-arg), and the harness to every ENS process a test
// starts from source. hooks.mjs says why it is not tsx.
import module from 'node:module';
import path from 'node:path';
import { cacheDir } from './paths.mjs';
import './children-without-processinfo.mjs';

module.register('./hooks.mjs', import.meta.url);

// Node 22.1 and later keep V8's compiled code of every module on disk, so the next process skips
// the compile: about 0.25 s of a test file's 1.6 s of CPU before its first assertion on Node 22.
// Node 20 has no such cache (the method is missing there). A directory that cannot be written
// only turns it off.
module.enableCompileCache?.(path.join(cacheDir, 'v8'));
