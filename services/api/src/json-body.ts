import type { FastifyInstance } from 'fastify';
import sjson from 'secure-json-parse';
import { Errors } from '@ens/core';

/**
 * The API's JSON body parser. Fastify's own answers every refusal with "Body is not valid JSON",
 * including a body it refuses because a `__proto__` or `constructor.prototype` key could reach
 * every object's prototype; a caller then hunts for a syntax error that is not there. This one
 * refuses the same bodies (secure-json-parse, as Fastify does) and says which case it is.
 */
export function installJsonBodyParser(app: FastifyInstance, bodyLimit: number): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit },
    (_req, body, done) => {
      const text = body as string;
      if (text.trim() === '')
        return done(Errors.badRequest('The request body is empty; send a JSON object.'), undefined);
      try {
        done(null, sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' }));
      } catch (e) {
        const message = (e as Error).message;
        if (/prototype/i.test(message)) {
          return done(
            Errors.badRequest(
              'The request body has a "__proto__" or "constructor.prototype" key, which ENS ' +
                'refuses (it could change the prototype of every object); rename that field.',
            ),
            undefined,
          );
        }
        return done(Errors.badRequest(`The request body is not valid JSON: ${message}`), undefined);
      }
    },
  );
}
