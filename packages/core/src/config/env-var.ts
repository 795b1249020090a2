import { Type, type TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { parseBackoff, parseDuration } from '../durations.ts';
import { ConfigError } from './config-error.ts';

/** The environment as given: unset and empty variables are both absent. */
export type RawEnv = Readonly<Record<string, string | undefined>>;

/**
 * One environment variable, declared once: its name, what the configuration reference says of it,
 * the TypeBox schema of its text (pattern, allowed values), its default, and the transform into
 * the typed value the code reads. The table in docs/reference/configuration.md is generated from
 * these declarations.
 */
export interface EnvVar<T> {
  readonly name: string;
  readonly doc: string;
  /** The default as the configuration reference shows it. */
  readonly shownDefault: string;
  readonly schema: TSchema;
  /**
   * The typed value; `env` lets a default depend on other variables (ENS_PUBLIC_URL on HOST and
   * PORT).
   */
  read(env: RawEnv): T;
}

interface Common {
  doc: string;
  /**
   * How the configuration reference shows the default, when the value itself does not say it well.
   */
  shown?: string;
}

/*
 * What deploy/kubernetes/secret.template.yaml puts where the operator must write a value: its
 * `CHANGE-ME` marker, or its `HOST` in a URL once the marker alone was deleted. A NATS_URL left so
 * made every process retry `getaddrinfo ENOTFOUND HOST` for ever; it is a configuration error.
 */
const PLACEHOLDER = /CHANGE-ME|[@/,]HOST(:\d+)?(?=[/,]|$)/;

/** The start-stopping error for a variable still holding the Secret template's placeholder. */
export function placeholderError(name: string, raw: string | undefined): ConfigError | null {
  if (raw === undefined || !PLACEHOLDER.test(raw)) return null;
  return new ConfigError(
    `${name}: still the placeholder of the Secret template (deploy/kubernetes/secret.template.yaml); set the real value`,
  );
}

/**
 * A refused value as an error may show it: a secret by its length only (an error line ends up in
 * logs), a URL with its password masked, anything else as it is.
 */
function shownValue(name: string, raw: string): string {
  if (/(SECRET|_KEY)$/.test(name)) return `(${raw.length} characters, not shown)`;
  return JSON.stringify(raw.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, '$1***@'));
}

function declare<T>(
  name: string,
  schema: TSchema,
  shownDefault: string,
  doc: string,
  transform: (raw: string | undefined, env: RawEnv) => T,
): EnvVar<T> {
  const check = Compile(schema);
  return {
    name,
    doc,
    shownDefault,
    schema,
    read(env) {
      const raw = env[name];
      const placeholder = placeholderError(name, raw);
      if (placeholder) throw placeholder;
      if (raw !== undefined && !check.Check(raw)) {
        const first = check.Errors(raw)[0];
        throw new ConfigError(
          `${name}: invalid value ${shownValue(name, raw)} (${first?.message ?? 'invalid'})`,
        );
      }
      try {
        return transform(raw, env);
      } catch (e) {
        if (e instanceof ConfigError) throw e;
        throw new ConfigError(`${name}: ${(e as Error).message}`);
      }
    },
  };
}

const code = (v: string) => `\`${v}\``;

/** A whole number within [min, max]. */
export function integer(
  name: string,
  o: Common & { default: number; min?: number; max?: number },
): EnvVar<number> {
  const min = o.min ?? 0;
  return declare(
    name,
    Type.String({ pattern: min >= 1 ? '^[1-9]\\d*$' : '^\\d+$', description: o.doc }),
    o.shown ?? code(String(o.default)),
    o.doc,
    (raw) => {
      if (raw === undefined) return o.default;
      const n = Number.parseInt(raw, 10);
      if (o.max !== undefined && n > o.max) throw new Error(`${n} is more than ${o.max}`);
      return n;
    },
  );
}

/** A duration such as `30s`, `10m`, `250ms`, in milliseconds. */
export function duration(name: string, o: Common & { default: string }): EnvVar<number> {
  return declare(
    name,
    Type.String({ minLength: 1, description: o.doc }),
    o.shown ?? code(o.default),
    o.doc,
    (raw) => parseDuration(raw ?? o.default),
  );
}

/** A comma-separated list of durations (a retry schedule), in milliseconds; at least one. */
export function backoff(name: string, o: Common & { default: string }): EnvVar<readonly number[]> {
  return declare(
    name,
    Type.String({ description: o.doc }),
    o.shown ?? code(o.default),
    o.doc,
    (raw) => {
      const list = parseBackoff(raw ?? o.default);
      if (list.length === 0) throw new Error('needs at least one delay');
      return Object.freeze(list);
    },
  );
}

/** `true` or `false`. */
export function flag(name: string, o: Common & { default: boolean }): EnvVar<boolean> {
  return declare(
    name,
    Type.Union([Type.Literal('true'), Type.Literal('false')], { description: o.doc }),
    o.shown ?? code(String(o.default)),
    o.doc,
    (raw) => (raw === undefined ? o.default : raw === 'true'),
  );
}

/** One of a fixed list of words. */
export function choice<const V extends readonly string[]>(
  name: string,
  values: V,
  o: Common & { default: V[number] },
): EnvVar<V[number]> {
  return declare(
    name,
    Type.Union(
      values.map((v) => Type.Literal(v)),
      { description: o.doc },
    ),
    o.shown ?? code(o.default),
    o.doc,
    (raw) => (raw ?? o.default) as V[number],
  );
}

/** Text with a default. */
export function text(
  name: string,
  o: Common & { default: string; pattern?: string },
): EnvVar<string> {
  return declare(
    name,
    Type.String({ minLength: 1, ...(o.pattern ? { pattern: o.pattern } : {}), description: o.doc }),
    o.shown ?? code(o.default),
    o.doc,
    (raw) => raw ?? o.default,
  );
}

/** Text that may be unset. */
export function optionalText(
  name: string,
  o: Common & { pattern?: string },
): EnvVar<string | undefined> {
  return declare(
    name,
    Type.String({ minLength: 1, ...(o.pattern ? { pattern: o.pattern } : {}), description: o.doc }),
    o.shown ?? 'unset',
    o.doc,
    (raw) => raw,
  );
}

/** Anything else: the transform gets the raw text (or undefined) and the whole environment. */
export function custom<T>(
  name: string,
  o: Common & {
    shown: string;
    pattern?: string;
    transform(raw: string | undefined, env: RawEnv): T;
  },
): EnvVar<T> {
  return declare(
    name,
    Type.String({ ...(o.pattern ? { pattern: o.pattern } : {}), description: o.doc }),
    o.shown,
    o.doc,
    o.transform,
  );
}
