import path from 'node:path';
import t from 'tap';
import {
  FLOORS,
  importsOf,
  packageOf,
  root,
  rootDevDependencies,
  workspaces,
  type Workspace,
} from './workspace-graph.ts';

/**
 * The folder tree is the architecture, and this test keeps it true:
 * - `apps/` (the `ens` program) composes the roles; `services/` (one per role) import packages
 *   only, never another role; `packages/` import each other; plugins import the plugin SDK only.
 * - Every workspace declares what it imports, so each one installs and builds on its own.
 * - Runtime code never reaches into another workspace by a relative path. Test files may, into the
 *   repository's shared harness (`test/harness/`), and may use the root's devDependencies.
 */

const all = workspaces();
const byName = new Map(all.map((w) => [w.name, w]));

function mayImport(from: Workspace, to: Workspace): boolean {
  if (from === to) return true;
  if (from.group === 'plugins') return to.name === '@ens/plugin-sdk';
  if (to.group === 'plugins') return false;
  return (
    FLOORS[to.group] < FLOORS[from.group] || (from.group === 'packages' && to.group === 'packages')
  );
}

interface Finding {
  kind: 'undeclared' | 'upward' | 'reaches out';
  file: string;
  specifier: string;
}

function findings(list: Workspace[] = all): Finding[] {
  const found: Finding[] = [];
  for (const ws of list) {
    for (const site of importsOf(ws)) {
      const pkg = packageOf(site.specifier);
      if (pkg === null) {
        if (!site.specifier.startsWith('.')) continue;
        const target = path.resolve(root, path.dirname(site.file), site.specifier);
        const inside = target.startsWith(ws.dir + path.sep);
        const harness =
          site.inTest && target.startsWith(path.join(root, 'test', 'harness') + path.sep);
        if (!inside && !harness)
          found.push({ kind: 'reaches out', file: site.file, specifier: site.specifier });
        continue;
      }
      const dep = byName.get(pkg);
      if (dep && !mayImport(ws, dep))
        found.push({ kind: 'upward', file: site.file, specifier: site.specifier });
      const declared =
        dep === ws || ws.declared.has(pkg) || (site.inTest && rootDevDependencies.has(pkg));
      if (!declared) found.push({ kind: 'undeclared', file: site.file, specifier: site.specifier });
    }
  }
  return found;
}

t.test('the workspaces are the four floors', async (t) => {
  t.ok(byName.has('@ens/app'), 'the ens program is an app');
  t.equal(byName.get('@ens/app')?.group, 'apps');
  for (const role of ['api', 'worker', 'callbacks', 'feed', 'ops'])
    t.equal(byName.get(`@ens/service-${role}`)?.group, 'services', role);
  for (const lib of ['core', 'plugin-sdk', 'local-engines'])
    t.equal(byName.get(`@ens/${lib}`)?.group, 'packages', lib);
});

t.test('every import points down or sideways into packages, and is declared', async (t) => {
  t.same(findings(), [], 'no undeclared, upward or out-reaching import');
});

t.test('the check catches what it is for', async (t) => {
  const api = byName.get('@ens/service-api')!;
  const core = byName.get('@ens/core')!;
  const sdk = byName.get('@ens/plugin-sdk')!;
  const twilio = byName.get('@ens/plugin-twilio')!;
  t.notOk(mayImport(api, byName.get('@ens/service-ops')!), 'a role may not import a role');
  t.notOk(mayImport(core, api), 'a package may not import a role');
  t.notOk(mayImport(core, byName.get('@ens/app')!), 'a package may not import the app');
  t.notOk(mayImport(twilio, core), 'a plugin imports the SDK only');
  t.notOk(mayImport(api, twilio), 'nothing imports a plugin: plugins are loaded by name');
  t.ok(mayImport(api, core), 'a role imports core');
  t.ok(mayImport(core, sdk), 'packages import each other');
  t.ok(mayImport(twilio, sdk), 'a plugin imports the SDK');
  const undeclared = findings([{ ...api, declared: new Set() }]);
  t.ok(
    undeclared.some((f) => f.kind === 'undeclared' && f.specifier === '@ens/core'),
    'a workspace that declares nothing is caught',
  );
});
