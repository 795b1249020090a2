import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { SUITE_LOADER } from '../../../test/harness/ens-process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * The AWS SDK is loaded by the S3 media store when ENS_MEDIA_STORE=s3 opens it, not with the
 * modules every ENS process loads: it cost each process about 0.27 s of CPU at start (every test
 * file and every `ens` command included) for a store most deployments do not use.
 */
function awsModulesAfter(imports: string[]): number {
  const script = `
    import { createRequire } from 'node:module';
    for (const m of ${JSON.stringify(imports)}) await import(m);
    const cache = createRequire(import.meta.url)('node:module')._cache;
    console.log(Object.keys(cache).filter((k) => k.includes('/@aws-sdk/')).length);
  `;
  return Number(
    execFileSync(
      process.execPath,
      ['--conditions=ens-source', SUITE_LOADER, '--input-type=module', '-e', script],
      {
        cwd: root,
      },
    ).toString(),
  );
}

t.test('an ENS process loads no AWS SDK module until an S3 store is opened', async (t) => {
  t.equal(
    awsModulesAfter(['@ens/core', '@ens/core/internal', '@ens/app/roles']),
    0,
    'the core, its internals and every role: none',
  );
  t.ok(
    awsModulesAfter([path.join(root, 'packages/core/src/media/s3-store.ts')]) > 0,
    'the S3 store itself: the SDK',
  );
});
