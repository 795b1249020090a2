import type { ConformanceFixture } from './fixture.ts';
import { runConformance } from './run.ts';

/** The part of a tap (or node:test-with-assert-shim) test object the helper uses. */
export interface TapLike {
  ok(value: unknown, message: string, extra: { [key: string]: unknown }): unknown;
}

/**
 * Runs the conformance checks inside a test: one assertion per check, with the reason as the
 * assertion's diagnostic. Usage with tap:
 *   t.test('conformance', (t) => conformanceTest(t, '@acme/ens-plugin-x', await import('../src/index.ts'), fixture));
 */
export async function conformanceTest(
  t: TapLike,
  pkg: string,
  mod: unknown,
  fixture?: ConformanceFixture,
): Promise<void> {
  for (const r of await runConformance(pkg, mod, fixture)) {
    t.ok(
      r.ok,
      r.skipped ? `${r.name} # SKIP ${r.detail ?? ''}` : r.name,
      r.ok ? {} : { diagnostic: true, detail: r.detail },
    );
  }
}
