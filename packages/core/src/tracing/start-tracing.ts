import { diag, DiagLogLevel, trace, type DiagLogger } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import { setTracingOn } from './switch.ts';

export interface Tracing {
  /** True when spans are recorded and exported. */
  readonly on: boolean;
  /** Exports the spans still held, then stops. */
  shutdown(): Promise<void>;
}

type TracingConfig = Config['tracing'];

/**
 * Whether the OTEL_* variables ask for traces: an endpoint set, or OTEL_TRACES_EXPORTER=otlp; and
 * neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none. Unlike the SDK's own default
 * (otlp to localhost), nothing set means off: an ENS that nobody pointed at a collector sends
 * nothing anywhere.
 */
export function tracingWanted(c: TracingConfig): boolean {
  if (c.sdkDisabled || c.exporter === 'none') return false;
  return c.exporter === 'otlp' || c.endpoint !== undefined || c.tracesEndpoint !== undefined;
}

/**
 * Where spans are posted, as the OTLP exporter specification composes it; undefined: the exporter's
 * default.
 */
export function tracesUrl(c: TracingConfig): string | undefined {
  if (c.tracesEndpoint !== undefined) return c.tracesEndpoint;
  if (c.endpoint !== undefined) return `${c.endpoint.replace(/\/+$/, '')}/v1/traces`;
  return undefined;
}

/** The SDK's own complaints (an export refused, a collector away) go to ENS's log. */
function diagLogger(logger: Logger): DiagLogger {
  const log = logger.child({ component: 'opentelemetry' });
  const quiet = () => {};
  return {
    error: (msg, ...args) => log.warn({ args }, msg),
    warn: (msg, ...args) => log.warn({ args }, msg),
    info: quiet,
    debug: quiet,
    verbose: quiet,
  };
}

/**
 * No tracing: what startTracing gives when nothing asks for it, and what a process without roles
 * uses.
 */
export const TRACING_OFF: Tracing = { on: false, shutdown: async () => {} };

/**
 * Starts the OpenTelemetry SDK for this process when the configuration asks for traces (see
 * tracingWanted): a tracer provider with a batch processor exporting OTLP over HTTP in protobuf,
 * registered as the global one that the span helpers (spans.ts) use. Otherwise nothing is started
 * and the API stays the no-op one. The SDK and the exporter are loaded only then: a process
 * without traces does not even load them.
 */
export async function startTracing(c: TracingConfig, logger: Logger): Promise<Tracing> {
  if (!tracingWanted(c)) return TRACING_OFF;
  const [
    { parseKeyPairsIntoRecord },
    { OTLPTraceExporter },
    { resourceFromAttributes },
    { BatchSpanProcessor, TracerProvider },
  ] = await Promise.all([
    import('@opentelemetry/core'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace'),
  ]);
  diag.setLogger(diagLogger(logger), DiagLogLevel.WARN);
  const exporter = new OTLPTraceExporter({
    url: tracesUrl(c),
    headers: { ...parseKeyPairsIntoRecord(c.headers), ...parseKeyPairsIntoRecord(c.tracesHeaders) },
  });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': c.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: c.scheduleDelayMs })],
  });
  trace.setGlobalTracerProvider(provider);
  setTracingOn(true);
  logger.info(
    { url: tracesUrl(c) ?? 'http://localhost:4318/v1/traces', serviceName: c.serviceName },
    'exporting traces',
  );
  let stopped: Promise<void> | undefined;
  return {
    on: true,
    shutdown() {
      stopped ??= (async () => {
        setTracingOn(false);
        try {
          await provider.shutdown();
        } catch (err) {
          logger.warn({ err }, 'exporting the last spans failed');
        }
        trace.disable();
        diag.disable();
      })();
      return stopped;
    },
  };
}
