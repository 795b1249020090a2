import path from 'node:path';
import t from 'tap';
import { root } from '../../../test/harness/ens-process.ts';
import { commonJsModulesAfter } from '../../../test/harness/modules-loaded.ts';

/**
 * The AWS SDK is loaded by the S3 media store when ENS_MEDIA_STORE=s3 opens it, not with the
 * modules every ENS process loads: it cost each process about 0.27 s of CPU at start (every test
 * file and every `ens` command included) for a store most deployments do not use.
 */
const AWS_SDK = '/@aws-sdk/';

t.test('an ENS process loads no AWS SDK module until an S3 store is opened', async (t) => {
  t.equal(
    commonJsModulesAfter(['@ens/core', '@ens/core/internal', '@ens/app/roles'], AWS_SDK),
    0,
    'the core, its internals and every role: none',
  );
  t.ok(
    commonJsModulesAfter([path.join(root, 'packages/core/src/media/s3-store.ts')], AWS_SDK) > 0,
    'the S3 store itself: the SDK',
  );
});
