import t from 'tap';
import { pino } from 'pino';
import { trace } from '@opentelemetry/api';
import { ConfigError, loadConfig } from '@ens/core';
import {
  endAttemptSpan,
  startAcceptSpan,
  startAttemptSpan,
  startCallbackPostSpan,
  startTracing,
  traceparentOf,
  tracesUrl,
  tracingOn,
  tracingWanted,
  validTraceparent,
} from '@ens/core/internal';
import { startOtlpReceiver } from '../../../test/harness/otlp-receiver.ts';
import { waitFor } from '../../../test/harness/service.ts';

const tracing = (env: Record<string, string>) => loadConfig(env).tracing;
const silent = pino({ level: 'silent' });
const CALLER = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const attempt = (traceparent: string | null) => ({
  id: 'd1',
  handoffId: 'h1',
  channel: 'sms',
  attempt: 1,
  traceparent,
});

t.test('which OTEL_ variables turn tracing on', async (t) => {
  t.equal(tracingWanted(tracing({})), false, 'nothing set: off');
  t.equal(
    tracingWanted(tracing({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_HEADERS: 'a=b' })),
    false,
    'a name or headers alone: off',
  );
  t.equal(
    tracingWanted(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })),
    true,
    'an endpoint: on',
  );
  t.equal(
    tracingWanted(tracing({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })),
    true,
    'a traces endpoint: on',
  );
  t.equal(
    tracingWanted(tracing({ OTEL_TRACES_EXPORTER: 'otlp' })),
    true,
    'OTEL_TRACES_EXPORTER=otlp: on',
  );
  t.equal(
    tracingWanted(
      tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }),
    ),
    false,
    'OTEL_SDK_DISABLED wins',
  );
  t.equal(
    tracingWanted(
      tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }),
    ),
    false,
    'none wins',
  );
});

t.test('where spans are posted', async (t) => {
  t.equal(
    tracesUrl(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })),
    'http://c:4318/v1/traces',
    'the base URL gets /v1/traces',
  );
  t.equal(
    tracesUrl(
      tracing({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9/x',
      }),
    ),
    'http://t:9/x',
    'the traces endpoint is used as is',
  );
  t.equal(
    tracesUrl(tracing({ OTEL_TRACES_EXPORTER: 'otlp' })),
    undefined,
    "none: the exporter's default",
  );
});

t.test('what the exporter cannot do stops the start, naming the variable', async (t) => {
  t.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), {
    constructor: ConfigError,
    message: /^OTEL_EXPORTER_OTLP_PROTOCOL: invalid value "grpc"/,
  });
  t.throws(() => loadConfig({ OTEL_TRACES_EXPORTER: 'console' }), {
    constructor: ConfigError,
    message: /^OTEL_TRACES_EXPORTER:/,
  });
  t.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }), {
    constructor: ConfigError,
    message: /^OTEL_EXPORTER_OTLP_ENDPOINT:/,
  });
  t.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'no-equals-sign' }), {
    constructor: ConfigError,
    message: /^OTEL_EXPORTER_OTLP_HEADERS:/,
  });
});

t.test('only a well-formed traceparent is stored', async (t) => {
  t.equal(validTraceparent(CALLER), CALLER);
  t.equal(validTraceparent(undefined), null);
  t.equal(validTraceparent('garbage'), null);
  t.equal(
    validTraceparent('00-00000000000000000000000000000000-b7ad6b7169203331-01'),
    null,
    'an all-zero trace id is invalid',
  );
  t.equal(validTraceparent(`${CALLER}${'x'.repeat(10_000)}`), null, 'nothing long is taken');
});

t.test('off: no exporter, the no-op tracer, and no span for untraced work', async (t) => {
  const off = await startTracing(tracing({}), silent);
  t.equal(off.on, false);
  t.equal(tracingOn(), false);
  t.equal(
    trace.getTracer('probe').startSpan('probe').isRecording(),
    false,
    'the global tracer is the no-op one',
  );
  t.equal(
    startAcceptSpan(undefined, undefined),
    null,
    'a request without traceparent starts no span',
  );
  t.equal(startAttemptSpan(attempt(null)), null, 'an untraced attempt starts no span');
  t.equal(
    startCallbackPostSpan({
      id: 'c1',
      deliveryId: 'd1',
      url: 'http://127.0.0.1/x',
      attempt: 1,
      traceparent: null,
    }),
    null,
    'an untraced post starts no span',
  );
  // A caller's traceparent is carried on unchanged: the no-op span keeps the parent's context.
  const carried = startAttemptSpan(attempt(CALLER))!;
  t.equal(carried.isRecording(), false);
  t.equal(traceparentOf(carried), CALLER);
  await off.shutdown();
});

t.test(
  'on: spans go to the OTLP endpoint, children of the stored traceparent, and a shutdown sends ' +
    'what is held',
  async (t) => {
    const otlp = await startOtlpReceiver(t);
    // A long delay: only the shutdown can have sent the span.
    const on = await startTracing(
      tracing({
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_SERVICE_NAME: 'unit',
        OTEL_BSP_SCHEDULE_DELAY: '60000',
      }),
      silent,
    );
    t.teardown(() => on.shutdown());
    t.equal(on.on, true);
    t.equal(tracingOn(), true);
    const span = startAttemptSpan(attempt(CALLER))!;
    t.equal(span.isRecording(), true);
    const own = traceparentOf(span)!;
    t.match(
      own,
      /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/,
      'same trace, a span of its own',
    );
    t.not(own, CALLER);
    endAttemptSpan(span, {
      outcome: 'failed',
      provider: 'sandbox',
      error: 'sandbox: refused',
      kind: 'permanent',
    });
    t.same(otlp.spans, [], 'held until the batch is due');
    await on.shutdown();
    t.equal(tracingOn(), false, 'off again after the shutdown');
    await waitFor(async () => otlp.spans.length === 1, 5_000, 'the span');
    const [s] = otlp.spans;
    t.match(s, {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      parentSpanId: 'b7ad6b7169203331',
      name: 'send sms',
      attributes: {
        'ens.provider': 'sandbox',
        'ens.outcome': 'failed',
        'ens.error.kind': 'permanent',
        'ens.delivery.id': 'd1',
        'ens.attempt': 1,
      },
      status: { code: 2, message: 'sandbox: refused' },
      resource: { 'service.name': 'unit' },
    });
    t.equal(
      trace.getTracer('probe').startSpan('probe').isRecording(),
      false,
      'the global tracer is the no-op one again',
    );
  },
);
