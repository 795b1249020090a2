import path from 'node:path';
import semver from 'semver';
import t from 'tap';
import { readJson, root } from './workspace-graph.ts';

/**
 * The README promises Node 20 as well as 22, and the root package.json's `engines.node` says from
 * which Node 20 on. A dependency whose own `engines.node` leaves that Node out makes `npm ci`
 * print an `EBADENGINE` warning to every newcomer on it (issue 25), and may use what that Node
 * lacks. package-lock.json records each installed package's `engines`, so this reads it there:
 * no install, no network. When a bump fails here, keep the older line the way package.json does
 * (a range on the direct dependency, or an entry in `overrides` for a transitive one).
 */
t.test('every locked package admits the lowest Node that ENS supports', async (t) => {
  const own = readJson(path.join(root, 'package.json')) as { engines: { node: string } };
  const lowest = semver.minVersion(own.engines.node);
  if (lowest === null) throw new Error(`engines.node ${own.engines.node} admits no version`);
  t.equal(lowest.major, 20, 'the lowest supported Node is a Node 20, as the README says');

  const lock = readJson(path.join(root, 'package-lock.json')) as {
    packages: Record<string, { version?: string; engines?: unknown }>;
  };
  const refused: string[] = [];
  for (const [where, pkg] of Object.entries(lock.packages)) {
    if (where === '') continue;
    // Old packages may still declare engines as an array of strings, which npm does not check.
    const range = (pkg.engines as { node?: unknown } | undefined)?.node;
    if (typeof range !== 'string') continue;
    if (!semver.satisfies(lowest, range)) refused.push(`${where}@${pkg.version}: node ${range}`);
  }
  t.same(refused, [], `no locked package refuses Node ${lowest.version}`);
});
