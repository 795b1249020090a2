import t from 'tap';
import { commonJsModulesAfter } from '../../../test/harness/modules-loaded.ts';

/**
 * The signed-in console (OIDC client, sessions, CSRF, every page) is imported when the API
 * registers it with ENS_OPS_ISSUER set, not with the roles module that every `ens serve` and most
 * test files load: it cost each of those processes 0.08–0.14 s of CPU at start to answer "not
 * configured". @fastify/csrf-protection stands for it here: it is CommonJS (openid-client is an
 * ES module, which require's cache does not show).
 */
const CSRF = '/node_modules/@fastify/csrf-protection/';

t.test('the roles module loads none of the signed-in console until it is configured', async (t) => {
  t.equal(commonJsModulesAfter(['@ens/app/roles'], CSRF), 0, 'the roles module: none');
  t.ok(
    commonJsModulesAfter(['./services/ops/src/signed-in-console.ts'], CSRF) > 0,
    'the signed-in console itself: @fastify/csrf-protection',
  );
});
