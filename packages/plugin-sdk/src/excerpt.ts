/**
 * A short excerpt of text from an address a client chose (a push service's error body, a
 * webhook's answer), fit for last_error and logs: one printable line of at most `max` characters.
 * Whatever an internal service answers must not travel back to a client in bulk, nor carry
 * control characters into logs.
 */
export function bodyExcerpt(text: string, max = 100): string {
  const flat = text
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what a log line must not hold
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
