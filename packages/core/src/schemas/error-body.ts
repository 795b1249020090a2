import { Type } from 'typebox';

/** The body of every 4xx/5xx answer of the API. */
export const ErrorBody = Type.Object({
  code: Type.Optional(
    Type.String({
      description:
        'Stable error code, e.g. ENS_ERR_VALIDATION. Absent only on the 401 for a missing or ' +
        'unacceptable token, whose body the spec gives as exactly {"detail": ...}.',
    }),
  ),
  detail: Type.String({ description: 'What went wrong, for a person' }),
  errors: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
});
