import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { SUITE_LOADER } from '../../../test/harness/ens-process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * The inbound role is imported when it starts (only where ENS_RETURN_PATH_DOMAIN is set), not with
 * the roles module that every `ens serve` and most test files load: its SMTP server and MIME
 * parser cost each of those processes about 0.1-0.2 s of CPU at start. mailparser stands for
 * them here: it is CommonJS, so its modules show in require's cache (smtp-server is loaded as ESM).
 */
function mailparserModulesAfter(imports: string[]): number {
  const script = `
    import { createRequire } from 'node:module';
    for (const m of ${JSON.stringify(imports)}) await import(m);
    const cache = createRequire(import.meta.url)('node:module')._cache;
    console.log(Object.keys(cache).filter((k) => k.includes('/node_modules/mailparser/')).length);
  `;
  return Number(
    execFileSync(
      process.execPath,
      ['--conditions=ens-source', SUITE_LOADER, '--input-type=module', '-e', script],
      { cwd: root },
    ).toString(),
  );
}

t.test('the roles module loads no inbound dependency until the inbound role starts', async (t) => {
  t.equal(mailparserModulesAfter(['@ens/app/roles']), 0, 'the roles module: no mailparser');
  t.ok(mailparserModulesAfter(['@ens/service-inbound']) > 0, 'the inbound role itself: mailparser');
});
