import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';
import type { Teardown } from './service.ts';

/*
 * The OTLP trace request's protobuf schema, as protobufjs reflection: the fields this receiver
 * reads, with the names and numbers of opentelemetry-proto (collector/trace/v1, trace/v1,
 * common/v1, resource/v1). Written from the specification rather than taken from the exporter's
 * package, so a wrong encoding in the exporter under test cannot be hidden by decoding with its
 * own tables (and no second, older OpenTelemetry tree is installed only for its generated code).
 * Unknown fields (events, links, timestamps, arrays) are skipped by protobufjs.
 */
const schema = protobuf.Root.fromJSON({
  nested: {
    AnyValue: {
      oneofs: { value: { oneof: ['stringValue', 'boolValue', 'intValue', 'doubleValue'] } },
      fields: {
        stringValue: { type: 'string', id: 1 },
        boolValue: { type: 'bool', id: 2 },
        intValue: { type: 'int64', id: 3 },
        doubleValue: { type: 'double', id: 4 },
      },
    },
    KeyValue: {
      fields: { key: { type: 'string', id: 1 }, value: { type: 'AnyValue', id: 2 } },
    },
    Resource: { fields: { attributes: { rule: 'repeated', type: 'KeyValue', id: 1 } } },
    Status: { fields: { message: { type: 'string', id: 2 }, code: { type: 'int32', id: 3 } } },
    Span: {
      fields: {
        traceId: { type: 'bytes', id: 1 },
        spanId: { type: 'bytes', id: 2 },
        parentSpanId: { type: 'bytes', id: 4 },
        name: { type: 'string', id: 5 },
        kind: { type: 'int32', id: 6 },
        attributes: { rule: 'repeated', type: 'KeyValue', id: 9 },
        status: { type: 'Status', id: 15 },
      },
    },
    ScopeSpans: { fields: { spans: { rule: 'repeated', type: 'Span', id: 2 } } },
    ResourceSpans: {
      fields: {
        resource: { type: 'Resource', id: 1 },
        scopeSpans: { rule: 'repeated', type: 'ScopeSpans', id: 2 },
      },
    },
    ExportTraceServiceRequest: {
      fields: { resourceSpans: { rule: 'repeated', type: 'ResourceSpans', id: 1 } },
    },
  },
});
const ExportTraceServiceRequest = schema.lookupType('ExportTraceServiceRequest');

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
  resourceSpans?: {
    resource?: { attributes?: RawKeyValue[] };
    scopeSpans?: { spans?: RawSpan[] }[];
  }[];
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
    out[kv.key] =
      v.stringValue ??
      (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
      v.boolValue ??
      v.doubleValue ??
      '';
  }
  return out;
}

/** Decodes one OTLP/HTTP protobuf trace export into its spans. */
export function decodeTraceExport(body: Uint8Array): ReceivedSpan[] {
  const req = ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(body), {
    longs: String,
    defaults: false,
  }) as RawRequest;
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
export async function startOtlpReceiver(
  t: Teardown,
  opts: { port?: number } = {},
): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: OtlpReceiver['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const contentType = req.headers['content-type'] ?? '';
      requests.push({ path: req.url ?? '', contentType });
      if (
        req.method !== 'POST' ||
        req.url !== '/v1/traces' ||
        contentType !== 'application/x-protobuf'
      ) {
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
