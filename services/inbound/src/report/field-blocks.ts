/**
 * The body of a message/delivery-status part (RFC 3464 section 2.1) or a message/feedback-report
 * part (RFC 5965 section 3.1): header-like fields (RFC 5322 syntax, folded lines allowed) in
 * blocks separated by blank lines. For a delivery status, the first block is about the message,
 * each later block about one recipient.
 *
 * It reads what real MTAs write as well as the RFC's own examples: LF or CRLF line ends, lines of
 * spaces between blocks (Exchange), several blank lines, folded values. It is written for hostile
 * input: bounded in blocks, fields and value length, and never throws. A line that is not a field
 * (and what is folded under it) is skipped: it cannot be mistaken for Action or Status, and a
 * report whose required fields are missing is refused by its reader. Too many blocks or fields
 * make the body unreadable (null).
 */

/** Field name (lower case) → its values in order. */
export type FieldBlock = ReadonlyMap<string, readonly string[]>;

const MAX_BLOCKS = 1_000;
const MAX_FIELDS_PER_BLOCK = 100;
const MAX_VALUE = 2_000;
/**
 * Control characters (NUL among them, which PostgreSQL's text refuses) become spaces: a value is
 * kept as evidence, and no report may make recording it fail.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters blanked, as said above
const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;
/** RFC 5322 field name: printable US-ASCII except the colon. */
const FIELD = /^([\x21-\x39\x3b-\x7e]+)[ \t]*:(.*)$/;

export function readFieldBlocks(text: string): FieldBlock[] | null {
  const blocks: Map<string, string[]>[] = [];
  let block: Map<string, string[]> | null = null;
  let last: { values: string[]; i: number } | null = null;
  let fields = 0;
  for (const line of text.replace(CONTROL, ' ').split(/\r?\n|\r/)) {
    if (line.trim() === '') {
      block = null;
      last = null;
      continue;
    }
    if (/^[ \t]/.test(line)) {
      // A folded continuation of the field before; one with no field before it is skipped.
      if (!last) continue;
      const v = `${last.values[last.i]} ${line.trim()}`;
      last.values[last.i] = v.length > MAX_VALUE ? v.slice(0, MAX_VALUE) : v;
      continue;
    }
    const m = FIELD.exec(line);
    if (!m) {
      last = null;
      continue;
    }
    if (!block) {
      if (blocks.length >= MAX_BLOCKS) return null;
      block = new Map();
      blocks.push(block);
      fields = 0;
    }
    if (++fields > MAX_FIELDS_PER_BLOCK) return null;
    const name = m[1]!.toLowerCase();
    const values = block.get(name) ?? [];
    values.push(m[2]!.trim().slice(0, MAX_VALUE));
    block.set(name, values);
    last = { values, i: values.length - 1 };
  }
  return blocks;
}

/** The first value of a field, or null. */
export function first(block: FieldBlock, name: string): string | null {
  return block.get(name)?.[0] ?? null;
}

/**
 * A structured field's value without RFC 5322 comments: `5.0.0 (permanent failure)` → `5.0.0`.
 * Comments may nest; quoted strings are kept as they are.
 */
export function withoutComments(value: string): string {
  let out = '';
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (c === '\\' && (quoted || depth > 0)) {
      if (depth === 0) out += c + (value[i + 1] ?? '');
      i++;
      continue;
    }
    if (depth === 0 && c === '"') quoted = !quoted;
    if (!quoted && c === '(') {
      depth++;
      continue;
    }
    if (!quoted && c === ')' && depth > 0) {
      depth--;
      continue;
    }
    if (depth === 0) out += c;
  }
  return out.replace(/\s+/g, ' ').trim();
}

/**
 * The address of a typed address field (`rfc822; user@example.com`, RFC 3464 section 2.3.2) or
 * of a plain mailbox (`<user@example.com>`, as RFC 5965's Original-Mail-From and a Return-Path
 * header give it); null when there is none.
 */
export function addressOf(value: string): string | null {
  let v = withoutComments(value);
  const semi = v.indexOf(';');
  if (semi >= 0 && /^[A-Za-z0-9-]+$/.test(v.slice(0, semi).trim())) v = v.slice(semi + 1).trim();
  const angle = /<([^<>]*)>/.exec(v);
  if (angle) v = angle[1]!.trim();
  return /^[^\s@<>]+@[^\s@<>]+$/.test(v) ? v : null;
}
