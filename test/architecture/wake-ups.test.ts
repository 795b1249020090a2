import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import * as internal from '@ens/core/internal';
import { root, sourceFiles, workspaces } from './workspace-graph.ts';

/**
 * Every transition goes through one door in core, which publishes the next stage's wake-up itself
 * after its own commit (DESIGN.md; issue 24): accepting (lifecycle/accept.ts), the delivery and
 * callback stores' transitions, recipient reports (the suppression store). So no file of
 * a role or of the app imports the publishers (wakeSenders, wakeFeed, wakeCallbacks) or publishes
 * to NATS itself: a caller that had to remember a wake-up is how the alert emails came to wake
 * their sender but not the feed.
 */

const PUBLISHERS = ['wakeSenders', 'wakeFeed', 'wakeCallbacks'] as const;

const stripComments = (text: string) =>
  text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/**
 * Named imports and re-exports: `import { a, b as c, type D } from 'x'`, `export { a } from 'x'`.
 */
const NAMED =
  /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[\w$]+\s*,\s*)?\{([^}]*)\}\s*from\s*['"][^'"]+['"]/g;

interface Finding {
  file: string;
  what: string;
}

/** What in `text` publishes a wake-up or reaches for a publisher. */
export function findingsIn(file: string, text: string): Finding[] {
  const code = stripComments(text);
  const found: Finding[] = [];
  for (const m of code.matchAll(NAMED)) {
    for (const part of m[1]!.split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)[0]!
        .trim();
      if ((PUBLISHERS as readonly string[]).includes(name))
        found.push({ file, what: `imports ${name}` });
    }
  }
  // A namespace import used as ns.wakeFeed(…), or a dynamic import's property.
  for (const m of code.matchAll(/\.\s*(wakeSenders|wakeFeed|wakeCallbacks)\b/g))
    found.push({ file, what: `uses .${m[1]}` });
  // A role's own code publishes nothing: every NATS publish is a wake-up, and core's doors make
  // them.
  if (!file.split(path.sep).includes('test') && /\.publish\s*\(/.test(code))
    found.push({ file, what: 'calls .publish(' });
  return found;
}

const rolesAndApp = workspaces().filter((w) => w.group === 'services' || w.group === 'apps');

t.test("no role or app publishes a wake-up: core's doors do, after their commits", async (t) => {
  t.ok(rolesAndApp.length >= 6, 'the roles and the app are scanned');
  const found = rolesAndApp.flatMap((w) =>
    sourceFiles(w.dir).flatMap((f) => findingsIn(path.relative(root, f), readFileSync(f, 'utf8'))),
  );
  t.same(
    found,
    [],
    'no import of wakeSenders, wakeFeed or wakeCallbacks, and no NATS publish, under services/ ' +
      'or apps/',
  );
});

t.test("the publishers are core's own, not in @ens/core/internal", async (t) => {
  for (const name of PUBLISHERS) t.notOk(name in internal, `${name} is not exported`);
});

t.test('the check catches what it is for', async (t) => {
  const f = path.join('services', 'x', 'src', 'a.ts');
  t.same(findingsIn(f, `import { consumeWorkQueue, wakeFeed } from '@ens/core/internal';`), [
    { file: f, what: 'imports wakeFeed' },
  ]);
  t.same(
    findingsIn(
      f,
      `import {\n  type CallbackWakeup,\n  wakeCallbacks as wake,\n} from '@ens/core/internal';`,
    ),
    [{ file: f, what: 'imports wakeCallbacks' }],
  );
  t.same(findingsIn(f, `export { wakeSenders } from '@ens/core/internal';`), [
    { file: f, what: 'imports wakeSenders' },
  ]);
  t.same(
    findingsIn(f, `import * as core from '@ens/core/internal';\ncore.wakeSenders(nc, [], logger);`),
    [{ file: f, what: 'uses .wakeSenders' }],
  );
  t.same(findingsIn(f, `rt.nc.publish('ens.feed.wake');`), [{ file: f, what: 'calls .publish(' }]);
  t.same(
    findingsIn(
      f,
      `// wakeFeed(rt.nc) is core's job now\nimport { accept } from '@ens/core';\nawait rt.deliveries.finish(claim, result);`,
    ),
    [],
    'comments, other imports and store calls are fine',
  );
  t.same(
    findingsIn(path.join('services', 'x', 'test', 'a.test.ts'), `nc.publish('ens.send.sms', 'x');`),
    [],
    'a test may publish to drive a role',
  );
});
