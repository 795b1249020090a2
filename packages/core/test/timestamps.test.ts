import t from 'tap';
import { isIsoTimestamp, parseTimestamp } from '../src/timestamps.ts';

// Every date that enters ENS passes parseTimestamp; PostgreSQL refuses these with 22008 or 22009.
t.test('a day, time or offset that does not exist is refused in both forms', async (t) => {
  for (const s of [
    '2026-02-30T00:00:00Z',
    '2025-02-29T00:00:00Z',
    '1900-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '0000-01-01T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T23:60:00Z',
    '2026-01-01T23:59:60Z',
    '2026-01-01T00:00:00+23:59',
    '2026-01-01T00:00:00+16:00',
    '2026-01-01T00:00:00+01:60',
    // Year 1 at +01:00 is 31 December of 1 BC in UTC.
    '0001-01-01T00:00:00+01:00',
    '9999-12-31T23:59:59-00:01',
  ]) {
    t.equal(parseTimestamp(s, { form: 'strict' }), null, `strict ${s}`);
    t.equal(parseTimestamp(s, { form: 'typed' }), null, `typed ${s}`);
    t.notOk(isIsoTimestamp(s), s);
  }
});

t.test('real instants are read, offsets applied', async (t) => {
  const strict = (s: string) => parseTimestamp(s, { form: 'strict' });
  t.equal(strict('2024-02-29T00:00:00Z'), '2024-02-29T00:00:00.000Z');
  t.equal(strict('2000-02-29T12:00:00+01:00'), '2000-02-29T11:00:00.000Z');
  t.equal(strict('2026-01-31T12:00:00.123456+00:00'), '2026-01-31T12:00:00.123Z');
  t.equal(strict('2026-01-01T00:00:00-0930'), '2026-01-01T09:30:00.000Z');
  t.equal(strict('2026-01-01T00:00:00+15:59'), '2025-12-31T08:01:00.000Z');
  t.equal(strict('0001-01-01T00:00:00Z'), '0001-01-01T00:00:00.000Z');
  t.equal(strict('0050-06-01T00:00:00Z'), '0050-06-01T00:00:00.000Z', 'not read as 1950');
  t.equal(strict('9999-12-31T23:59:59Z'), '9999-12-31T23:59:59.000Z');
});

t.test(
  'the strict form wants seconds and an offset; the typed form takes them as UTC',
  async (t) => {
    for (const s of [
      '2026-01-01T00:00Z',
      '2026-01-01T00:00:00',
      '2026-01-01',
      '2026-01-01 00:00:00Z',
    ])
      t.equal(parseTimestamp(s, { form: 'strict' }), null, s);
    const typed = (s: string) => parseTimestamp(s, { form: 'typed' });
    t.equal(typed('2025-01-31T14:00'), '2025-01-31T14:00:00.000Z');
    t.equal(typed('2025-01-31 14:00:05'), '2025-01-31T14:00:05.000Z');
    t.equal(typed('2025-01-31'), '2025-01-31T00:00:00.000Z');
    t.equal(typed('2025-01-31T14:00:00+02:00'), '2025-01-31T12:00:00.000Z');
    t.equal(typed('yesterday'), null);
    t.equal(typed('2025-01-31T14:00 and more'), null);
  },
);
