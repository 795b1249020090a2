import t from 'tap';
import { startTestService, smsHandoff, waitFor } from '../harness/service.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** /healthz, /readyz, /metrics, /docs, request ids and unknown routes. */
t.test('operations endpoints', async (t) => {
  const svc = await startTestService(t);

  t.test('/healthz is 200', async (t) => {
    const r = await svc.request('GET', '/healthz');
    t.equal(r.status, 200);
    t.same(r.body, { status: 'ok' });
  });

  t.test('/readyz is 200 with every check ok', async (t) => {
    const r = await svc.request('GET', '/readyz');
    t.equal(r.status, 200);
    t.same(r.body, { status: 'ready', checks: { postgres: 'ok', nats: 'ok' } });
  });

  t.test('/metrics is Prometheus text with the request and acceptance series', async (t) => {
    const client = await svc.createClient();
    await svc.tenant(client, 'acme');
    t.equal(
      (await svc.send(client, smsHandoff('acme', ['+15551230001', '+15551230002']))).status,
      202,
    );
    const r = await svc.request('GET', '/metrics');
    t.equal(r.status, 200);
    t.match(r.headers.get('content-type'), /^text\/plain/);
    t.match(r.text, /^# HELP ens_http_request_duration_seconds /m);
    t.match(r.text, /^# TYPE ens_http_request_duration_seconds histogram$/m);
    t.match(
      r.text,
      /^ens_http_request_duration_seconds_count\{[^}]*route="\/v2\/messages"[^}]*\} \d+/m,
      'the send was timed under its route',
    );
    t.match(r.text, /^# TYPE ens_deliveries_accepted_total counter$/m);
    const accepted = /^ens_deliveries_accepted_total\{channel="sms"\} (\d+)/m.exec(r.text);
    t.ok(accepted, 'sms acceptances are counted');
    t.equal(Number(accepted?.[1]), 2, 'one per delivery');
  });

  t.test('/docs/json is an OpenAPI 3.1 document with the API paths', async (t) => {
    const r = await svc.request('GET', '/docs/json');
    t.equal(r.status, 200);
    t.equal(r.body.openapi, '3.1.0');
    for (const path of [
      '/v1/oauth2/token/',
      '/v2/messages',
      '/v2/deliveries',
      '/v2/tenants',
      '/v2/tenants/{tenant}',
    ]) {
      t.ok(r.body.paths[path], `documents ${path}`);
    }
    t.ok(r.body.paths['/v2/messages'].post, 'POST /v2/messages');
    for (const path of ['/healthz', '/readyz', '/metrics'])
      t.same(r.body.paths[path]?.get?.security, [], `${path} is documented, without a token`);
    const ui = await svc.request('GET', '/docs/');
    t.equal(ui.status, 200, 'the documentation page is served');
  });

  t.test('GET / is a small page that points to /docs and /ops/', async (t) => {
    const r = await svc.request('GET', '/');
    t.equal(r.status, 200);
    t.match(r.headers.get('content-type'), /^text\/html/);
    t.match(r.text, /<a href="\/docs">\/docs<\/a>/);
    t.match(r.text, /<a href="\/ops\/">\/ops\/<\/a>/);
    t.match(
      r.headers.get('content-security-policy'),
      /default-src 'none'/,
      'with the same strictness as /docs and /ops/',
    );
    t.equal(r.headers.get('x-frame-options'), 'DENY');
    t.equal(r.headers.get('x-content-type-options'), 'nosniff');
  });

  t.test('every response carries an x-request-id', async (t) => {
    const ids = new Set<string>();
    for (const [method, path] of [
      ['GET', '/healthz'],
      ['GET', '/v2/tenants'],
      ['GET', '/nowhere'],
      ['POST', '/v1/oauth2/token/'],
    ] as const) {
      const r = await svc.request(method, path);
      const id = r.headers.get('x-request-id');
      t.match(id, UUID, `${method} ${path} (${r.status})`);
      ids.add(id!);
    }
    t.equal(ids.size, 4, 'one id per request');
    const given = await svc.request('GET', '/healthz', {
      headers: { 'x-request-id': 'caller-chosen-id-1' },
    });
    t.equal(
      given.headers.get('x-request-id'),
      'caller-chosen-id-1',
      "a caller's own request id is kept, to correlate logs",
    );
  });

  t.test('an unknown route is 404 with code and detail', async (t) => {
    for (const [method, path] of [
      ['GET', '/v3/messages'],
      ['DELETE', '/v2/messages'],
      ['GET', '/v2/tenants/a/b'],
    ] as const) {
      const r = await svc.request(method, path);
      t.equal(r.status, 404, `${method} ${path}`);
      t.equal(r.body.code, 'ENS_ERR_NOT_FOUND');
      t.match(r.body.detail, path);
    }
  });

  // Last: it stops the file's NATS server.
  t.test('/readyz is 503 naming NATS once NATS is down', async (t) => {
    await svc.engines.nats.stop();
    const r = await waitFor(
      async () => {
        const r = await svc.request('GET', '/readyz');
        return r.status === 503 ? r : null;
      },
      10_000,
      '/readyz to report NATS down',
    );
    t.equal(r.body.status, 'not ready');
    t.equal(r.body.checks.postgres, 'ok');
    t.not(r.body.checks.nats, 'ok');
    t.type(r.body.checks.nats, 'string');
    t.equal(
      (await svc.request('GET', '/healthz')).status,
      200,
      '/healthz still says the process is up',
    );
  });
});
