import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  trace,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/*
 * A trace crosses ENS's processes as a W3C `traceparent` text stored with the work (handoffs and
 * callbacks rows), never through memory: the roles may run in separate processes. The propagator
 * is used directly rather than through the global one, so a traceparent a caller sent is carried
 * through to its callback even in a process where no SDK is registered.
 */
const w3c = new W3CTraceContextPropagator();

/**
 * The context whose span is the one `traceparent` names; the root context when it is absent or
 * malformed.
 */
export function contextFrom(traceparent: string | null | undefined, tracestate?: string): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return w3c.extract(
    ROOT_CONTEXT,
    tracestate ? { traceparent, tracestate } : { traceparent },
    defaultTextMapGetter,
  );
}

/**
 * `text` as a well-formed traceparent (the form this version of the spec writes), or null when it
 * is not one.
 */
export function validTraceparent(text: string | undefined): string | null {
  if (!text) return null;
  const parent = trace.getSpanContext(contextFrom(text));
  return parent ? traceparentOf(trace.wrapSpanContext(parent)) : null;
}

/**
 * The `traceparent` that makes a receiver's span a child of `span`; null when its context is
 * invalid.
 */
export function traceparentOf(span: Span): string | null {
  const carrier: Record<string, string> = {};
  w3c.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
  return carrier.traceparent ?? null;
}
