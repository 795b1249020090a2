// The test suite's TypeScript loader: `node --import=./test/harness/loader/register.mjs`. tap gives
// it to every test file (package.json "tap" node-arg), and the harness to every ENS process a test
// starts from source. hooks.mjs says why it is not tsx.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
