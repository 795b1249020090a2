/**
 * Renders an instant the way every ENS timestamp is written: ISO 8601, UTC, explicit `+00:00`
 * offset, six fractional digits (PostgreSQL keeps microseconds; JavaScript has milliseconds).
 */
export function formatTimestamp(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:?\d{2})$/;

/** True for an ISO 8601 date-time with an explicit offset, the form `updated_since` takes. */
export function isIsoTimestamp(s: string): boolean {
  return ISO.test(s) && !Number.isNaN(Date.parse(s.replace(/(\.\d{3})\d+/, '$1')));
}
