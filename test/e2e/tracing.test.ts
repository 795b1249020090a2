import t from 'tap';
import { context, defaultTextMapSetter, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { freePort } from '@ens/local-engines';
import { spawnEns, type EnsProcess } from '../harness/ens-process.ts';
import {
  SPAN_KIND,
  STATUS_ERROR,
  startOtlpReceiver,
  type ReceivedSpan,
} from '../harness/otlp-receiver.ts';
import { startReceiver } from '../harness/receiver.ts';
import {
  startTestService,
  uniqueKey,
  waitFor,
  type Teardown,
  type TestClient,
  type TestService,
} from '../harness/service.ts';

/*
 * Issue 10, "Traces": a caller's span, ENS's accept, each send attempt and each callback post in
 * one trace, exported over OTLP/HTTP (protobuf) to a receiver that decodes them with the official
 * OTLP definitions. The API and the worker + callbacks roles run in two separate `ens serve`
 * processes, so the trace can only cross between them through the database.
 */

const OTEL_UNSET = {
  OTEL_SDK_DISABLED: '',
  OTEL_TRACES_EXPORTER: '',
  OTEL_EXPORTER_OTLP_ENDPOINT: '',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
  OTEL_EXPORTER_OTLP_HEADERS: '',
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: '',
  OTEL_SERVICE_NAME: '',
  OTEL_BSP_SCHEDULE_DELAY: '',
};

/** A span made by the test itself, as a calling service would, exported to the same receiver. */
function callerTracer(endpoint: string) {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'caller' }),
    spanProcessors: [
      new SimpleSpanProcessor({
        exporter: new OTLPTraceExporter({ url: `${endpoint}/v1/traces` }),
      }),
    ],
  });
  return { tracer: provider.getTracer('caller'), provider };
}

function traceparentOf(
  span: ReturnType<ReturnType<typeof callerTracer>['tracer']['startSpan']>,
): string {
  const carrier: Record<string, string> = {};
  new W3CTraceContextPropagator().inject(
    trace.setSpan(context.active(), span),
    carrier,
    defaultTextMapSetter,
  );
  return carrier.traceparent!;
}

/**
 * Starts `ens serve` with these roles and waits until it runs (its API answers, or it logged that
 * it runs).
 */
async function serveRoles(
  t: Teardown,
  svc: TestService,
  roles: string,
  env: Record<string, string>,
): Promise<{ proc: EnsProcess; url: string }> {
  const port = await freePort();
  const proc = spawnEns(['serve', '--roles', roles], {
    ...svc.env,
    ENS_PROCESSES: '1',
    PORT: String(port),
    ENS_LOG_LEVEL: 'info',
    ...env,
  });
  t.teardown(() => proc.kill9());
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () =>
      (roles.includes('api')
        ? (await fetch(`${url}/healthz`).catch(() => null))?.ok
        : proc.output().includes('ENS running')) || proc.child.exitCode !== null,
    60_000,
    `ens serve --roles ${roles}`,
  );
  if (proc.child.exitCode !== null)
    throw new Error(`ens serve --roles ${roles} exited: ${proc.output()}`);
  return { proc, url };
}

async function send(
  url: string,
  client: TestClient,
  body: unknown,
  headers: Record<string, string>,
) {
  const res = await fetch(`${url}/v2/messages`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${await client.token()}`,
      'content-type': 'application/json',
      'idempotency-key': uniqueKey('trace'),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    body: (await res.json()) as { deliveries: { delivery_id: string; recipient: string }[] },
  };
}

/** SIGTERM, and the exit: a stop that also exports the spans still held. */
async function stop(proc: EnsProcess): Promise<void> {
  if (proc.child.exitCode !== null) return;
  proc.child.kill('SIGTERM');
  await proc.exited;
}

t.test(
  'one trace holds the caller span, the accept, every send attempt and every callback post',
  async (t) => {
    // This process serves the API used to set up (client, tenant, token); it records no spans.
    const svc = await startTestService(t, { roles: ['api'], env: OTEL_UNSET });
    const client = await svc.createClient();
    await svc.tenant(client, 'traced');
    const otlp = await startOtlpReceiver(t);
    const callbacks = await startReceiver(t, [200]);
    const otel = {
      ...OTEL_UNSET,
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_SERVICE_NAME: 'ens-under-test',
    };
    const api = await serveRoles(t, svc, 'api', otel);
    const work = await serveRoles(t, svc, 'worker,callbacks', otel);

    const { tracer, provider } = callerTracer(otlp.url);
    const caller = tracer.startSpan('caller sends a notification');
    const traceId = caller.spanContext().traceId;
    // +1555…1111 fails twice (transient), then is sent: three attempts. The other is sent at once.
    const r = await send(
      api.url,
      client,
      {
        tenant: 'traced',
        event_type: 'trace.test',
        callback_url: callbacks.url,
        messages: [
          {
            channel: 'sms',
            recipients: ['+15551230001', '+15551231111'],
            content: { kind: 'rendered', body: 'hi' },
          },
        ],
      },
      { traceparent: traceparentOf(caller) },
    );
    caller.end();
    await provider.shutdown();
    t.equal(r.status, 202);
    const idOf = (recipient: string) =>
      r.body.deliveries.find((d) => d.recipient === recipient)!.delivery_id;
    const plain = idOf('+15551230001');
    const flaky = idOf('+15551231111');

    await waitFor(async () => callbacks.posts.length >= 2, 60_000, 'both callbacks');
    const inTrace = () => otlp.spans.filter((s) => s.traceId === traceId);
    const named = (prefix: string) => inTrace().filter((s) => s.name.startsWith(prefix));
    await waitFor(
      async () =>
        named('send sms').length >= 4 &&
        named('POST callback').length >= 2 &&
        named('POST /v2/messages').length >= 1 &&
        named('caller').length >= 1,
      20_000,
      'the spans to be exported',
    );
    t.ok(
      otlp.requests.every(
        (q) => q.path === '/v1/traces' && q.contentType === 'application/x-protobuf',
      ),
      'every export is OTLP/HTTP protobuf to /v1/traces',
    );

    const [root] = named('caller');
    t.equal(root!.parentSpanId, '', 'the caller span is the root');
    t.equal(root!.resource['service.name'], 'caller');

    const accepts = named('POST /v2/messages');
    t.equal(accepts.length, 1, 'one accept span');
    const accept = accepts[0]!;
    t.equal(accept.parentSpanId, root!.spanId, 'the accept is a child of the caller span');
    t.equal(accept.kind, SPAN_KIND.SERVER);
    t.equal(accept.resource['service.name'], 'ens-under-test', 'OTEL_SERVICE_NAME names ENS');
    t.match(accept.attributes, {
      'http.request.method': 'POST',
      'http.route': '/v2/messages',
      'http.response.status_code': 202,
      'ens.tenant': 'traced',
      'ens.deliveries': 2,
      'ens.client.id': client.clientId,
    });
    t.equal(typeof accept.attributes['ens.handoff.id'], 'string');

    const attempts = named('send sms');
    t.equal(attempts.length, 4, 'four attempt spans: one, and three for the flaky recipient');
    t.ok(
      attempts.every((a) => a.parentSpanId === accept.spanId),
      'every attempt is a child of the accept (across processes, through the database)',
    );
    t.ok(
      attempts.every(
        (a) =>
          a.kind === SPAN_KIND.CLIENT &&
          a.attributes['ens.provider'] === 'sandbox' &&
          a.attributes['ens.channel'] === 'sms',
      ),
      'each names its provider and channel',
    );
    const ofDelivery = (id: string) =>
      attempts
        .filter((a) => a.attributes['ens.delivery.id'] === id)
        .sort((a, b) => Number(a.attributes['ens.attempt']) - Number(b.attributes['ens.attempt']));
    const flakyAttempts = ofDelivery(flaky);
    t.same(
      flakyAttempts.map((a) => [a.attributes['ens.attempt'], a.attributes['ens.outcome']]),
      [
        [1, 'retry'],
        [2, 'retry'],
        [3, 'sent'],
      ],
      'a failed attempt that is retried is a span of its own',
    );
    for (const failed of flakyAttempts.slice(0, 2)) {
      t.equal(failed.status.code, STATUS_ERROR, 'a failed attempt has status error');
      t.equal(failed.attributes['ens.error.kind'], 'transient');
      t.match(failed.status.message, /^sandbox:/);
    }
    t.not(flakyAttempts[2]!.status.code, STATUS_ERROR);
    t.match(flakyAttempts[2]!.attributes['ens.provider_message_id'], /^sandbox-/);
    const plainAttempts = ofDelivery(plain);
    t.same(
      plainAttempts.map((a) => a.attributes['ens.outcome']),
      ['sent'],
    );

    const posts = named('POST callback');
    t.equal(posts.length, 2, 'one post span per callback');
    for (const id of [plain, flaky]) {
      const post = posts.find((p) => p.attributes['ens.delivery.id'] === id)!;
      const sent = ofDelivery(id).find((a) => a.attributes['ens.outcome'] === 'sent')!;
      t.equal(
        post.parentSpanId,
        sent.spanId,
        'the callback post is a child of the attempt that queued it',
      );
      t.equal(post.kind, SPAN_KIND.CLIENT);
      t.match(post.attributes, {
        'http.request.method': 'POST',
        'http.response.status_code': 200,
        'ens.outcome': 'delivered',
        'url.full': callbacks.url,
        'server.address': '127.0.0.1',
      });
      const received = callbacks.posts.find(
        (p) => (JSON.parse(p.raw.toString()) as { delivery_id: string }).delivery_id === id,
      )!;
      t.equal(
        received.headers.traceparent,
        `00-${traceId}-${post.spanId}-01`,
        'the callback request carries the traceparent of its own post span',
      );
    }
    // Each id is one span: nothing was exported twice, and every span of the trace is one of the
    // above.
    t.equal(new Set(inTrace().map((s: ReceivedSpan) => s.spanId)).size, inTrace().length);
    t.equal(inTrace().length, 1 + 1 + 4 + 2);
    t.match(api.proc.output(), /exporting traces/, 'the process says where it exports');

    // A refused request is traced too: the schema's 400 is the accept span's status code.
    const refusedTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const refused = await send(
      api.url,
      client,
      { tenant: 'traced' },
      { traceparent: `00-${refusedTrace}-00f067aa0ba902b7-01` },
    );
    t.equal(refused.status, 400);
    const [refusedSpan] = await waitFor(
      async () => {
        const f = otlp.spans.filter((s) => s.traceId === refusedTrace);
        return f.length > 0 && f;
      },
      10_000,
      "the refused request's span",
    );
    t.match(refusedSpan, {
      name: 'POST /v2/messages',
      parentSpanId: '00f067aa0ba902b7',
      attributes: { 'http.response.status_code': 400 },
    });
    t.not(
      refusedSpan!.status.code,
      STATUS_ERROR,
      "a 4xx is the caller's error, not the server span's",
    );
    await Promise.all([stop(api.proc), stop(work.proc)]);
  },
);

t.test(
  "with no OTEL variable set nothing is exported, and a caller's traceparent still reaches its " +
    'callback',
  async (t) => {
    const svc = await startTestService(t, { roles: ['api'], env: OTEL_UNSET });
    const client = await svc.createClient();
    await svc.tenant(client, 'untraced');
    // Where an SDK left at its defaults would send (localhost:4318), when that port is free here.
    const atDefault = await startOtlpReceiver(t, { port: 4318 }).catch(() => null);
    if (!atDefault) t.comment('port 4318 is taken; only the callback is checked');
    const callbacks = await startReceiver(t, [200]);
    const ens = await serveRoles(t, svc, 'api,worker,callbacks', OTEL_UNSET);
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const r = await send(
      ens.url,
      client,
      {
        tenant: 'untraced',
        event_type: 'trace.test',
        callback_url: callbacks.url,
        messages: [
          {
            channel: 'sms',
            recipients: ['+15551230002'],
            content: { kind: 'rendered', body: 'hi' },
          },
        ],
      },
      { traceparent },
    );
    t.equal(r.status, 202);
    await waitFor(async () => callbacks.posts.length >= 1, 60_000, 'the callback');
    t.equal(
      callbacks.posts[0]!.headers.traceparent,
      traceparent,
      "with no span of its own, the callback names the caller's span",
    );
    // A stop exports whatever an SDK would still hold.
    await stop(ens.proc);
    if (atDefault) t.same(atDefault.requests, [], 'no export request was made');
    t.notMatch(ens.proc.output(), /exporting traces/, 'no exporter was started');
  },
);
