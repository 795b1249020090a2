import type { FieldError } from './errors.ts';

/*
 * Bytes no field may carry, checked once for every part of every request (body, query string, path
 * parameters) before any schema (the API's validator) or any query (the console's hook): NUL, which
 * PostgreSQL's text cannot store (it answered 500), and lone UTF-16 surrogates, which JSON allows
 * as escapes but UTF-8 cannot encode (they were stored as U+FFFD, so the record differed from the
 * 202 body). Nesting is bounded too, so a 4,000-level object is refused here rather than walked by
 * everything after.
 */

/** Deepest nesting of objects and arrays any request may have; ENS's own shapes need 6. */
export const MAX_DEPTH = 32;

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function badText(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(s))
    return 'must be well-formed Unicode (it holds a lone surrogate, \\uD800–\\uDFFF)';
  return null;
}

const pointer = (path: string, key: string) =>
  `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;

/**
 * The first field that holds forbidden text or nests too deep, as a validation error entry; null
 * when clean.
 */
export function findHostileInput(value: unknown, path = '', depth = 0): FieldError | null {
  if (typeof value === 'string') {
    const why = badText(value);
    return why ? { path: path || '/', message: why } : null;
  }
  if (value === null || typeof value !== 'object') return null;
  if (depth >= MAX_DEPTH)
    return { path: path || '/', message: `nests deeper than ${MAX_DEPTH} levels` };
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findHostileInput(value[i], `${path}/${i}`, depth + 1);
      if (found) return found;
    }
    return null;
  }
  for (const [key, v] of Object.entries(value)) {
    const why = badText(key);
    if (why) return { path: pointer(path, key), message: `is a key that ${why}` };
    const found = findHostileInput(v, pointer(path, key), depth + 1);
    if (found) return found;
  }
  return null;
}
