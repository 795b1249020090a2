import type { FastifySchemaCompiler } from 'fastify';
import type { TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { Value } from 'typebox/value';
import { Errors, type FieldError } from '@ens/core';
import { findHostileInput } from '@ens/core/internal';

interface SchemaError {
  keyword: string;
  schemaPath: string;
  instancePath: string;
  message: string;
  params?: {
    additionalProperties?: string[];
    requiredProperties?: string[];
    allowedValue?: unknown;
    type?: string;
  };
}

const ALTERNATIVE = /\/anyOf\/\d+$/;

/** An alternative of a union of literals or simple types: what it would have accepted. */
function alternative(e: SchemaError): string | null {
  if (!ALTERNATIVE.test(e.schemaPath)) return null;
  if (e.keyword === 'const') return JSON.stringify(e.params?.allowedValue);
  if (e.keyword === 'type' && e.params?.type) return e.params.type;
  return null;
}

/**
 * Turns TypeBox's errors into one entry per problem, at the path of the field concerned: a missing
 * field is reported at its own path ("is required"), an unknown one at its path ("is not a known
 * field"), and a value outside a union of literals or types as "must be one of …" (or "must be
 * string or null") rather than one entry per alternative.
 */
function fieldErrors(raw: SchemaError[]): FieldError[] {
  const out: FieldError[] = [];
  const unions = new Map<string, string[]>();
  for (const e of raw) {
    const alt = alternative(e);
    if (alt === null) continue;
    const key = `${e.instancePath}\u0000${e.schemaPath.replace(ALTERNATIVE, '')}`;
    unions.set(key, [...(unions.get(key) ?? []), alt]);
  }
  for (const e of raw) {
    const at = e.instancePath;
    const union = e.keyword === 'anyOf' ? unions.get(`${at}\u0000${e.schemaPath}`) : undefined;
    if (e.keyword === 'required') {
      for (const name of e.params?.requiredProperties ?? [])
        out.push({ path: `${at}/${name}`, message: 'is required' });
    } else if (e.keyword === 'additionalProperties') {
      for (const name of e.params?.additionalProperties ?? [])
        out.push({ path: `${at}/${name}`, message: 'is not a known field' });
    } else if (e.keyword === 'boolean' && e.schemaPath.endsWith('/additionalProperties')) {
      // The same unknown field again, as "schema is false"; reported above.
    } else if (
      alternative(e) !== null &&
      unions.has(`${at}\u0000${e.schemaPath.replace(ALTERNATIVE, '')}`)
    ) {
      // One alternative of a union; the union's own entry below says what would do.
    } else if (union) {
      const literals = union.every((a) => !/^[a-z]+$/.test(a));
      out.push({
        path: at || '/',
        message: literals ? `must be one of ${union.join(', ')}` : `must be ${union.join(' or ')}`,
      });
    } else {
      out.push({ path: at || '/', message: e.message });
    }
  }
  const seen = new Set<string>();
  return out.filter((f) => {
    const k = `${f.path}\u0000${f.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

const hasDefault = (s: unknown): boolean =>
  s !== null &&
  typeof s === 'object' &&
  (Object.hasOwn(s, 'default') || Object.values(s).some(hasDefault));
const hasRef = (s: unknown): boolean =>
  s !== null &&
  typeof s === 'object' &&
  (Object.hasOwn(s, '$ref') || Object.values(s).some(hasRef));

/**
 * A copy of a TypeBox schema (with its non-enumerable markers, such as optional) with some fields
 * replaced.
 */
const withFields = (s: TSchema, fields: Record<string, unknown>): TSchema =>
  Object.assign(
    Object.create(
      Object.getPrototypeOf(s) as object,
      Object.getOwnPropertyDescriptors(s),
    ) as TSchema,
    fields,
  );

/**
 * The part of a schema that can fill in defaults: the objects and arrays on the way to each
 * `default`, with every property that has none below it left out; null when the schema has no
 * default at all. TypeBox's Default walks the whole value, checking each union alternative against
 * it on the way, which cost more per request than validating the body; walking this instead fills
 * in the same defaults. A schema with references is kept whole (the walk needs its definitions).
 */
function defaultsOnly(schema: TSchema): TSchema | null {
  if (!hasDefault(schema)) return null;
  if (hasRef(schema)) return schema;
  const prune = (s: TSchema): TSchema | null => {
    if (!hasDefault(s)) return null;
    if (Object.hasOwn(s, 'default')) return s;
    const o = s as TSchema & {
      '~kind'?: string;
      properties?: Record<string, TSchema>;
      items?: TSchema;
      additionalProperties?: unknown;
    };
    if (o['~kind'] === 'Object' && o.properties && typeof o.additionalProperties !== 'object') {
      const properties: Record<string, TSchema> = {};
      for (const [k, v] of Object.entries(o.properties)) {
        const p = prune(v);
        if (p) properties[k] = p;
      }
      return withFields(s, { properties });
    }
    if (o['~kind'] === 'Array' && o.items) {
      const items = prune(o.items);
      return items && !hasDefault({ ...o, items: undefined }) ? withFields(s, { items }) : s;
    }
    return s; // anything else (unions, records…) is walked whole
  };
  return prune(schema);
}

/** An object schema whose declared properties are all plain strings (no default, no other type). */
function stringsOnly(schema: TSchema): boolean {
  const o = schema as TSchema & {
    type?: unknown;
    properties?: Record<string, TSchema & { type?: unknown }>;
    additionalProperties?: unknown;
  };
  return (
    o.type === 'object' &&
    typeof o.additionalProperties !== 'object' &&
    !hasDefault(schema) &&
    Object.values(o.properties ?? {}).every((p) => p.type === 'string')
  );
}

/**
 * Fastify validator backed by compiled TypeBox schemas. Every failure becomes ENS_ERR_VALIDATION
 * listing each problem with its JSON pointer, so the caller fixes a request in one round.
 * Query strings and params arrive as strings and are converted to the schema's types first
 * (headers too, unless the schema wants only strings).
 */
export const typeboxValidator: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const check = Compile(schema);
  const defaults = defaultsOnly(schema);
  const withDefaults = (v: unknown) =>
    defaults === null ? v : defaults === schema ? check.Default(v) : Value.Default(defaults, v);
  // Header values are strings already: converting them to a schema of strings would change nothing.
  const convert =
    httpPart === 'querystring' ||
    httpPart === 'params' ||
    (httpPart === 'headers' && !stringsOnly(schema));
  const where =
    httpPart === 'body' ? 'body' : httpPart === 'querystring' ? 'query' : (httpPart ?? 'request');
  return (input: unknown) => {
    const hostile = findHostileInput(input);
    if (hostile)
      return {
        error: Errors.validation(`Invalid ${where}: ${hostile.path} ${hostile.message}`, [hostile]),
      };
    let value = convert ? check.Convert(withDefaults(structuredClone(input))) : input;
    if (!convert && value !== null && typeof value === 'object') value = withDefaults(value);
    if (check.Check(value)) return { value };
    const errors = fieldErrors(check.Errors(value) as SchemaError[]);
    const first = errors[0];
    return {
      error: Errors.validation(
        `Invalid ${where}: ${first ? `${first.path} ${first.message}` : 'does not match the schema'}`,
        errors,
      ),
    };
  };
};
