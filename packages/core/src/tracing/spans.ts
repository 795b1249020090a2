import { SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { AttemptResult } from '../store/deliveries.ts';
import { tracingOn } from './switch.ts';
import { contextFrom } from './trace-context.ts';

/*
 * The spans ENS records, made with the OpenTelemetry API (the SDK started by startTracing records
 * and exports them). Each start returns null, starting nothing, when tracing is off and the work
 * carries no traceparent; a traceparent a caller sent is carried on even when tracing is off (the
 * no-op tracer's span keeps the parent's context), so its callback still names the caller's span.
 * docs/guides/tracing.md lists the names and attributes.
 */

const tracer = () => trace.getTracer('ens');

/**
 * The server span of `POST /v2/messages`, child of the caller's span when `traceparent` names one.
 */
export function startAcceptSpan(
  traceparent: string | undefined,
  tracestate: string | undefined,
): Span | null {
  if (traceparent === undefined && !tracingOn()) return null;
  return tracer().startSpan(
    'POST /v2/messages',
    {
      kind: SpanKind.SERVER,
      attributes: { 'http.request.method': 'POST', 'http.route': '/v2/messages' },
    },
    contextFrom(traceparent, tracestate),
  );
}

/** What the request asks to store, once it has been checked. */
export function noteAccepted(
  span: Span,
  a: { clientId: string; tenant: string; deliveries: number },
): void {
  span.setAttributes({
    'ens.client.id': a.clientId,
    'ens.tenant': a.tenant,
    'ens.deliveries': a.deliveries,
  });
}

/** The handoff the 202 names; a replay names the one first accepted with its Idempotency-Key. */
export function noteHandoff(span: Span, handoffId: string, replayed: boolean): void {
  span.setAttributes({ 'ens.handoff.id': handoffId, 'ens.idempotent_replay': replayed });
}

export function endAcceptSpan(span: Span, statusCode: number | null): void {
  if (statusCode === null) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the request was aborted' });
  } else {
    span.setAttribute('http.response.status_code', statusCode);
    // The server span of a 4xx is not in error (the caller's request was), as OpenTelemetry's HTTP
    // conventions say.
    if (statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** One attempt to send a delivery through its channel's providers. */
export function startAttemptSpan(d: {
  id: string;
  handoffId: string;
  channel: string;
  attempt: number;
  traceparent: string | null;
}): Span | null {
  if (d.traceparent === null && !tracingOn()) return null;
  return tracer().startSpan(
    `send ${d.channel}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'ens.delivery.id': d.id,
        'ens.handoff.id': d.handoffId,
        'ens.channel': d.channel,
        'ens.attempt': d.attempt,
      },
    },
    contextFrom(d.traceparent),
  );
}

/**
 * Ends an attempt with its outcome; an Error is an attempt cut short before it had one (a claim or
 * a store that failed).
 */
export function endAttemptSpan(span: Span, result: AttemptResult | Error): void {
  if (result instanceof Error) {
    span.recordException(result);
    span.setStatus({ code: SpanStatusCode.ERROR, message: result.message });
  } else {
    span.setAttributes({ 'ens.provider': result.provider, 'ens.outcome': result.outcome });
    if (result.outcome === 'sent') {
      span.setAttribute('ens.provider_message_id', result.providerMessageId);
    } else {
      span.setAttribute('ens.error.kind', result.kind);
      span.setStatus({ code: SpanStatusCode.ERROR, message: result.error });
    }
  }
  span.end();
}

/**
 * The URL as a span may show it: no credentials, no query (a receiver's token often rides there).
 */
function shownUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** One HTTP post of a callback, child of the attempt (or status report) that queued it. */
export function startCallbackPostSpan(cb: {
  id: string;
  deliveryId: string;
  url: string;
  attempt: number;
  traceparent: string | null;
}): Span | null {
  if (cb.traceparent === null && !tracingOn()) return null;
  const attributes: Record<string, string | number> = {
    'http.request.method': 'POST',
    'ens.callback.id': cb.id,
    'ens.delivery.id': cb.deliveryId,
    'ens.callback.attempt': cb.attempt,
  };
  try {
    const url = new URL(cb.url);
    Object.assign(attributes, {
      'url.full': shownUrl(url),
      'server.address': url.hostname,
      'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
    });
  } catch {
    // The poster refuses the URL and says why; the span only goes without it.
  }
  return tracer().startSpan(
    'POST callback',
    { kind: SpanKind.CLIENT, attributes },
    contextFrom(cb.traceparent),
  );
}

export function endCallbackPostSpan(
  span: Span,
  out:
    | { outcome: 'delivered'; status: number }
    | { outcome: 'failed'; status?: number; error: string },
): void {
  span.setAttribute('ens.outcome', out.outcome);
  if (out.status !== undefined) span.setAttribute('http.response.status_code', out.status);
  if (out.outcome === 'failed') {
    span.setAttribute('error.type', out.status !== undefined ? String(out.status) : 'network');
    span.setStatus({ code: SpanStatusCode.ERROR, message: out.error });
  }
  span.end();
}
