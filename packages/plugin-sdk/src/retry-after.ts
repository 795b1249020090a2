/**
 * Reads an HTTP Retry-After header (RFC 9110 §10.2.3: delay-seconds or an HTTP-date) as the
 * milliseconds to pass to rateLimitedError; undefined when absent or unreadable, 0 for a date
 * already past. Most HTTP providers send it with 429 and 503.
 */
export function retryAfterMs(
  header: string | null | undefined,
  now = Date.now(),
): number | undefined {
  if (header === null || header === undefined || header.trim() === '') return undefined;
  const v = header.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
