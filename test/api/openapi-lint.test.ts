import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { startDocumentedService } from './openapi-fixture.ts';

/**
 * The served OpenAPI document passes Redocly's recommended rules with no error and no warning.
 * The rules are those of redocly.yaml at the repository root: `recommended`, with only the
 * trailing-slash rule off (the interface fixes the token path as /v1/oauth2/token/).
 */
const root = path.resolve(import.meta.dirname, '../..');
const redocly = path.join(root, 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');

interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { pointer: string }[];
}

t.test('the live OpenAPI document lints clean under Redocly recommended', async (t) => {
  const svc = await startDocumentedService(t);
  const res = await fetch(`${svc.baseUrl}/docs/json`);
  t.equal(res.status, 200);
  const doc = (await res.json()) as { paths: Record<string, unknown> };
  t.ok(
    Object.keys(doc.paths).some((p) => p.startsWith('/webhooks/')),
    'the webhook routes are in the linted document',
  );

  const dir = await mkdtemp(path.join(tmpdir(), 'ens-openapi-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'openapi.json');
  await writeFile(file, JSON.stringify(doc, null, 2));

  // Redocly exits non-zero when it finds an error; its JSON report is on stdout either way.
  const run = await promisify(execFile)(
    process.execPath,
    [redocly, 'lint', file, '--config', path.join(root, 'redocly.yaml'), '--format', 'json'],
    {
      cwd: root,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      maxBuffer: 16 * 1024 * 1024,
    },
  ).catch((e: { stdout?: string; stderr?: string }) => ({
    stdout: e.stdout ?? '',
    stderr: e.stderr ?? '',
  }));
  let report: {
    totals: { errors: number; warnings: number; ignored: number };
    problems: LintProblem[];
  };
  try {
    report = JSON.parse(run.stdout);
  } catch {
    t.fail(`redocly printed no JSON report; stderr: ${run.stderr}`);
    return;
  }
  const listed = report.problems.map(
    (p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`,
  );
  t.same(listed, [], 'no problem reported');
  t.equal(report.totals.errors, 0, '0 errors');
  t.equal(report.totals.warnings, 0, '0 warnings');
  t.equal(report.totals.ignored, 0, 'nothing ignored');
});
