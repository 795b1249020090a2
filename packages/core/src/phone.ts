/**
 * Normalises a phone number to E.164 with a leading `+`: the spec accepts digits with or without
 * `+`; separators a person might type (spaces, dashes, dots, brackets) are dropped. Returns null
 * when the result is not 8–15 digits.
 */
export function normalisePhone(input: string): string | null {
  const stripped = input.trim().replace(/[\s\-().]/g, '');
  const m = /^\+?(\d{8,15})$/.exec(stripped);
  if (!m || m[1]!.startsWith('0')) return null;
  return `+${m[1]}`;
}
