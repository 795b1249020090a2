import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import * as core from '@ens/core';
import * as internal from '@ens/core/internal';
import { root } from './workspace-graph.ts';

/**
 * @ens/core names its public surface; the roles' shared machinery sits behind @ens/core/internal.
 * Both entries are lists a reader can scan, never `export *`, and no name is in both.
 */
t.test('the public and internal entries name every export', async (t) => {
  for (const entry of ['index.ts', 'internal.ts']) {
    const text = readFileSync(path.join(root, 'packages/core/src', entry), 'utf8');
    t.notMatch(text, /export \*/, `${entry} has no export *`);
  }
});

t.test('public and internal are apart', async (t) => {
  const both = Object.keys(core).filter((k) => k in internal);
  t.same(both, [], 'no name is exported by both');
  for (const machinery of [
    'consumeWorkQueue',
    'createPool',
    'parseSendWakeup',
    'startJobs',
    'Coalescer',
    'SecretBox',
    'httpDuration',
  ]) {
    t.notOk(machinery in core, `${machinery} is not public`);
    t.ok(machinery in internal, `${machinery} is internal`);
  }
  for (const domain of [
    'loadConfig',
    'Errors',
    'openRuntime',
    'Handoff',
    'planDeliveries',
    'checkOutboundUrl',
    'migrate',
  ])
    t.ok(domain in core, `${domain} is public`);
});
