import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import type { Teardown } from './service.ts';

/*
 * The official OTLP protobuf definitions (opentelemetry-proto), as the protobufjs static module that
 * @opentelemetry/otlp-transformer generated from them (the trace definitions up to 0.216; installed as the dev
 * dependency `otlp-proto-root`, pinned: later releases encode by hand and ship none).
 */
const require = createRequire(import.meta.url);
const root = require('otlp-proto-root/build/src/generated/root.js') as ProtoRoot;
const ExportTraceServiceRequest = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

interface ProtoRoot {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: { decode(b: Uint8Array): unknown; toObject(m: unknown, o: object): RawRequest } } } } } };
}
interface RawValue {
  stringValue?: string;
  intValue?: string;
  boolValue?: boolean;
  doubleValue?: number;
}
interface RawKeyValue {
  key: string;
  value?: RawValue;
}
interface RawSpan {
  traceId: Buffer;
  spanId: Buffer;
  parentSpanId?: Buffer;
  name: string;
  kind: number;
  attributes?: RawKeyValue[];
  status?: { code?: number; message?: string };
}
interface RawRequest {
  resourceSpans?: { resource?: { attributes?: RawKeyValue[] }; scopeSpans?: { spans?: RawSpan[] }[] }[];
}

/** A span as it arrived, ids in lower-case hex. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  /** The resource's attributes (service.name…). */
  resource: Record<string, string | number | boolean>;
}

export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;
export const STATUS_ERROR = 2;

function attributes(list: RawKeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of list ?? []) {
    const v = kv.value ?? {};
    out[kv.key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue ?? '';
  }
  return out;
}

/** Decodes one OTLP/HTTP protobuf trace export into its spans. */
export function decodeTraceExport(body: Uint8Array): ReceivedSpan[] {
  const req = ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(body), { longs: String, defaults: false });
  const spans: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = attributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          traceId: Buffer.from(s.traceId).toString('hex'),
          spanId: Buffer.from(s.spanId).toString('hex'),
          parentSpanId: s.parentSpanId ? Buffer.from(s.parentSpanId).toString('hex') : '',
          name: s.name,
          kind: s.kind,
          attributes: attributes(s.attributes),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
          resource,
        });
      }
    }
  }
  return spans;
}

export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  url: string;
  spans: ReceivedSpan[];
  /** Every request that arrived, whatever its path or type. */
  requests: { path: string; contentType: string }[];
}

/**
 * An OTLP/HTTP receiver on loopback, standing in for a collector: it answers `POST /v1/traces`
 * in protobuf, as a collector does, and keeps the decoded spans. Anything else is a 404 (and is
 * recorded, so a test sees a request it did not expect).
 */
export async function startOtlpReceiver(t: Teardown, opts: { port?: number } = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: OtlpReceiver['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const contentType = req.headers['content-type'] ?? '';
      requests.push({ path: req.url ?? '', contentType });
      if (req.method !== 'POST' || req.url !== '/v1/traces' || contentType !== 'application/x-protobuf') {
        res.writeHead(404).end();
        return;
      }
      try {
        spans.push(...decodeTraceExport(Buffer.concat(chunks)));
      } catch {
        res.writeHead(400).end();
        return;
      }
      // An empty ExportTraceServiceResponse: everything accepted.
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, requests };
}
