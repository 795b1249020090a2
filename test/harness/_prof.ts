import { startTestEngines } from './engines.ts';
import { startPostgres, startNats, findPostgresBinaries } from '@ens/local-engines';
let t = performance.now();
const lap = (s: string) => { const n = performance.now(); console.log(s, Math.round(n - t)); t = n; };
await findPostgresBinaries(); lap('findbins');
const e = await startTestEngines(); lap('harness1');
await e.stop(); lap('stop1');
const e2 = await startTestEngines(); lap('harness2');
await e2.stop(); lap('stop2');
