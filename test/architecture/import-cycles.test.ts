import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { readJson, root } from './workspace-graph.ts';

/**
 * `npm run lint` (run first by `npm test`) checks the workspaces for import cycles with
 * dependency-cruiser and the rule in .dependency-cruiser.cjs. These tests prove that check finds
 * a cycle inside a workspace and one that crosses workspaces through their node_modules links
 * and the `ens-source` export condition, and that `npm test` runs it over every workspace folder.
 */

const CONFIG = path.join(root, '.dependency-cruiser.cjs');
const CLI = path.join(root, 'node_modules', '.bin', 'depcruise');

interface Cruise {
  code: number;
  /** The report `npm run lint` prints: one `error no-circular: a → b → a` per cycle. */
  report: string;
}

/** Runs the lint's cycle check over `dirs` of `cwd`, as `npm run lint` does. */
async function cruise(cwd: string, dirs: string[]): Promise<Cruise> {
  const args = ['--config', CONFIG, '--output-type', 'err', ...dirs];
  try {
    const { stdout } = await promisify(execFile)(CLI, args, { cwd });
    return { code: 0, report: stdout };
  } catch (e) {
    const err = e as { code?: number; stdout?: string };
    if (typeof err.code !== 'number' || err.stdout === undefined) throw e;
    return { code: err.code, report: err.stdout };
  }
}

/** The cycles of a report, each as its modules in the order the check found them. */
function cycles(report: string): string[][] {
  return [...report.matchAll(/error no-circular: ([\s\S]*?)\n\n/g)].map((m) =>
    m[1]!.split(/\s*→\s*/).map((s) => s.trim()),
  );
}

function write(dir: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
}

function fixture(t: Test): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'ens-cycles-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  write(dir, {
    'tsconfig.json': JSON.stringify({
      compilerOptions: {
        module: 'ESNext',
        moduleResolution: 'bundler',
        customConditions: ['ens-source'],
        allowImportingTsExtensions: true,
      },
    }),
  });
  return dir;
}

t.test('npm test runs the cycle check over every workspace folder', async (t) => {
  const scripts = readJson(path.join(root, 'package.json')).scripts as Record<string, string>;
  t.match(scripts.test, /^npm run lint && /, 'npm test runs the lint first');
  const depcruise = /depcruise (.*)$/.exec(scripts.lint ?? '')?.[1] ?? '';
  for (const folder of ['packages', 'services', 'plugins', 'apps'])
    t.ok(depcruise.split(/\s+/).includes(folder), `the cycle check reads ${folder}/`);
});

t.test('the check catches what it is for', async (t) => {
  t.test('a cycle between two modules of one workspace', async (t) => {
    const dir = fixture(t);
    write(dir, {
      'packages/a/src/accept.ts':
        "import { batch } from './batcher.ts';\nexport const a = batch;\n",
      'packages/a/src/batcher.ts':
        "import type { a } from './accept.ts';\nexport const batch = 1 as unknown as typeof a;\n",
      'packages/a/src/alone.ts': "import { batch } from './batcher.ts';\nexport const b = batch;\n",
    });
    const found = await cruise(dir, ['packages']);
    t.not(found.code, 0, 'the check fails');
    t.same(
      cycles(found.report).map((c) => [...new Set(c)].sort()),
      [['packages/a/src/accept.ts', 'packages/a/src/batcher.ts']],
      "the report names the cycle's two modules, not the module outside it",
      { report: found.report },
    );
  });

  t.test('a cycle across workspaces, through a node_modules link and ens-source', async (t) => {
    const dir = fixture(t);
    const pkg = (name: string) =>
      JSON.stringify({
        name,
        type: 'module',
        exports: { '.': { 'ens-source': './src/index.ts', default: './dist/index.js' } },
      });
    write(dir, {
      'packages/low/package.json': pkg('@fx/low'),
      'packages/low/src/index.ts': "import { high } from '@fx/high';\nexport const low = high;\n",
      'services/high/package.json': pkg('@fx/high'),
      'services/high/src/index.ts': "import { low } from '@fx/low';\nexport const high = low;\n",
    });
    mkdirSync(path.join(dir, 'node_modules', '@fx'), { recursive: true });
    symlinkSync('../../packages/low', path.join(dir, 'node_modules', '@fx', 'low'));
    symlinkSync('../../services/high', path.join(dir, 'node_modules', '@fx', 'high'));
    const found = await cruise(dir, ['packages', 'services']);
    t.not(found.code, 0, 'the check fails');
    t.ok(
      cycles(found.report).some(
        (c) => c.includes('packages/low/src/index.ts') && c.includes('services/high/src/index.ts'),
      ),
      "the cycle names both workspaces' sources",
      { report: found.report },
    );
  });

  t.test('modules without a cycle pass', async (t) => {
    const dir = fixture(t);
    write(dir, {
      'packages/a/src/accept.ts':
        "import { batch } from './batcher.ts';\nexport const a = batch;\n",
      'packages/a/src/batcher.ts': 'export const batch = 1;\n',
    });
    const found = await cruise(dir, ['packages']);
    t.equal(found.code, 0, 'the check passes');
    t.same(cycles(found.report), [], 'and reports no cycle');
  });
});
