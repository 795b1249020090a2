const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses one duration such as `500ms`, `10s`, `1m`, `2h`, `1d` (a bare number is seconds) into
 * milliseconds.
 */
export function parseDuration(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) throw new Error(`"${text}" is not a duration (examples: 500ms, 10s, 1m, 2h)`);
  return Math.round(Number(m[1]) * UNIT_MS[m[2] ?? 's']!);
}

/**
 * Parses a comma-separated back-off schedule (`1s,10s,1m`) into delays in ms; its length bounds the
 * retries.
 */
export function parseBackoff(text: string): number[] {
  const parts = text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
  return parts.map(parseDuration);
}
