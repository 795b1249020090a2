import t from 'tap';
import { commonJsModulesAfter } from '../../../test/harness/modules-loaded.ts';

/**
 * The inbound role is imported when it starts (only where ENS_RETURN_PATH_DOMAIN is set), not with
 * the roles module that every `ens serve` and most test files load: its SMTP server and MIME
 * parser cost each of those processes about 0.1-0.2 s of CPU at start. mailparser stands for
 * them here: it is CommonJS (smtp-server is loaded as an ES module).
 */
const MAILPARSER = '/node_modules/mailparser/';

t.test('the roles module loads no inbound dependency until the inbound role starts', async (t) => {
  t.equal(commonJsModulesAfter(['@ens/app/roles'], MAILPARSER), 0, 'the roles module: none');
  t.ok(
    commonJsModulesAfter(['@ens/service-inbound'], MAILPARSER) > 0,
    'the inbound role itself: mailparser',
  );
});
