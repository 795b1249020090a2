import { Type, type TLiteral, type TSchemaOptions, type TUnion } from 'typebox';

type Literals<T extends readonly string[]> = { -readonly [K in keyof T]: TLiteral<T[K]> };

/**
 * A TypeBox union of string literals built from a constant list, so the list stays the one source
 * of the schema, the TypeScript type and the OpenAPI document. The schema is the same `anyOf` of
 * `const`s that writing the literals out gives; mapping the list directly would lose the type
 * (TypeBox reads an array that is not a tuple as `never`).
 */
export function literalUnion<const T extends readonly string[]>(
  values: T,
  options?: TSchemaOptions,
): TUnion<Literals<T>> {
  return Type.Union(
    values.map((v) => Type.Literal(v)),
    options,
  ) as unknown as TUnion<Literals<T>>;
}
