/**
 * Renders an instant the way every ENS timestamp is written: ISO 8601, UTC, explicit `+00:00`
 * offset, six fractional digits (PostgreSQL keeps microseconds; JavaScript has milliseconds).
 */
export function formatTimestamp(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
}

/*
 * Every date a caller gives ENS (the feed's updated_since and cursor, the console's filters and
 * page links) passes parseTimestamp before it reaches PostgreSQL. Date.parse is no check: it rolls
 * 30 February over to 2 March and takes year 0 and a +23:59 offset, all of which PostgreSQL refuses
 * (22008, 22009), so such a date answered 500. Fields are checked one by one here instead, and the
 * instant must fall in years 1 to 9999 in UTC, where JavaScript and PostgreSQL read it alike.
 */
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?)?([Zz]|[+-]\d{2}:?\d{2})?$/;
const STRICT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:?\d{2})$/;

/** PostgreSQL's largest time zone displacement is 15:59; real zones stay within ±14:00. */
const MAX_OFFSET_MINUTES = 15 * 60 + 59;
const FIRST = Date.parse('0001-01-01T00:00:00Z');
const LAST = Date.parse('9999-12-31T23:59:59.999Z');
const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysIn(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return month === 2 && leap ? 29 : DAYS[month - 1]!;
}

export interface TimestampForm {
  /**
   * `strict` (the API's form): date, `T`, time with seconds, and an offset, all required.
   * `typed` (the console's form): a date alone, or a time without seconds; a missing offset is UTC.
   */
  form: 'strict' | 'typed';
}

/**
 * Reads a date-time a caller gave; returns the instant in ISO 8601 UTC (milliseconds), or null
 * when it is not a date-time of that form, names a day or time that does not exist (30 February,
 * 24:00, an offset past ±15:59), or falls outside years 1 to 9999 in UTC.
 *
 * @example parseTimestamp('2026-01-31T12:00:00+01:00', { form: 'strict' }) // '2026-01-31T11:00:00.000Z'
 */
export function parseTimestamp(text: string, { form }: TimestampForm): string | null {
  if (form === 'strict' && !STRICT.test(text)) return null;
  const m = DATE_TIME.exec(text);
  if (!m) return null;
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone = 'Z'] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return null;
  let offset = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(-2));
    if (om > 59 || oh * 60 + om > MAX_OFFSET_MINUTES) return null;
    offset = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const ms = frac ? Math.floor(Number(`0${frac}`) * 1000) : 0;
  // Date.UTC reads years 0–99 as 1900–1999; setUTCFullYear does not.
  const at = new Date(Date.UTC(2000, month - 1, day, Number(h), Number(mi), Number(s), ms));
  at.setUTCFullYear(year);
  const t = at.getTime() - offset * 60_000;
  if (t < FIRST || t > LAST) return null;
  return new Date(t).toISOString();
}

/**
 * True for an ISO 8601 date-time with an explicit offset that names a real instant (the API's
 * form).
 */
export function isIsoTimestamp(s: string): boolean {
  return parseTimestamp(s, { form: 'strict' }) !== null;
}
