#!/usr/bin/env node
// The operator command. Runs the built CLI (npm ci builds it through the prepare script).
import('@ens/app').catch((e) => {
  if (e?.code === 'ERR_MODULE_NOT_FOUND') {
    process.stderr.write(
      'ens: the build is missing; run `npm run build` (npm ci does it for you)\n',
    );
    process.exit(1);
  }
  throw e;
});
