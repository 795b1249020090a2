import type { FastifySchemaCompiler } from 'fastify';
import type { TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { Errors, type FieldError } from '@ens/core';

/**
 * Fastify validator backed by compiled TypeBox schemas. Every failure becomes ENS_ERR_VALIDATION
 * listing each problem with its JSON pointer, so the caller fixes a request in one round.
 * Query strings and params arrive as strings and are converted to the schema's types first.
 */
export const typeboxValidator: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const check = Compile(schema);
  const convert = httpPart === 'querystring' || httpPart === 'params' || httpPart === 'headers';
  return (input: unknown) => {
    let value = convert ? check.Convert(check.Default(structuredClone(input))) : input;
    if (!convert && value !== null && typeof value === 'object') value = check.Default(value);
    if (check.Check(value)) return { value };
    const errors: FieldError[] = check.Errors(value).map((e) => {
      const params = (e as { params?: { additionalProperties?: string[] } }).params;
      const extra = params?.additionalProperties;
      return extra && extra.length > 0
        ? { path: `${e.instancePath}/${extra[0]}`, message: 'is not a known field' }
        : { path: e.instancePath || '/', message: e.message };
    });
    const first = errors[0];
    const where = httpPart === 'body' ? 'body' : httpPart === 'querystring' ? 'query' : (httpPart ?? 'request');
    return { error: Errors.validation(`Invalid ${where}: ${first ? `${first.path} ${first.message}` : 'does not match the schema'}`, errors) };
  };
};
