import t from 'tap';
import Fastify from 'fastify';
import { installErrorHandler } from '../src/error-handler.ts';
import { webhookRoutes } from '../src/routes/webhooks.ts';

/** A provider webhook's 413 states the webhook limit (1 MiB), not the API's ENS_MAX_BODY_BYTES. */
t.test('an oversized provider webhook body', async (t) => {
  const app = Fastify({ bodyLimit: 20 * 1024 * 1024 });
  installErrorHandler(app);
  await app.register(
    webhookRoutes([
      {
        name: 'fake',
        provider: {
          send: async () => ({ providerMessageId: 'x' }),
          routes: [{ method: 'POST', path: '/status', handler: async () => ({ status: 204 }) }],
        },
      },
    ]),
  );
  t.teardown(() => app.close());
  const big = await app.inject({
    method: 'POST',
    url: '/webhooks/fake/status',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'x'.repeat(1024 * 1024 + 1),
  });
  t.equal(big.statusCode, 413);
  t.match(big.json().detail, /limit of 1048576 bytes\.$/, 'the detail states the webhook limit');
  t.notMatch(big.json().detail, /ENS_MAX_BODY_BYTES/, 'and not the API body limit');
  const ok = await app.inject({
    method: 'POST',
    url: '/webhooks/fake/status',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'a=b',
  });
  t.equal(ok.statusCode, 204);
});
