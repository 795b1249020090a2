/*
 * Whether this process records spans (startTracing turned an exporter on). When it does not, work
 * that carries no traceparent starts no span at all, so the hot paths pay nothing for tracing.
 */
let recording = false;

export function tracingOn(): boolean {
  return recording;
}

/** For startTracing only. */
export function setTracingOn(on: boolean): void {
  recording = on;
}
