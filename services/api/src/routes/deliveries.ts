import type { FastifyInstance } from 'fastify';
import { errorResponses, success, V2_ERRORS } from '../openapi/responses.ts';
import {
  DeliveryPage,
  DeliveryQuery,
  readFeed,
  type DeliveryQuery as DeliveryQueryT,
  type Runtime,
} from '@ens/core';

/** GET /v2/deliveries — the authoritative, pull-able record, as a change feed. */
export function deliveriesRoute(app: FastifyInstance, rt: Runtime): void {
  app.get<{ Querystring: DeliveryQueryT }>(
    '/v2/deliveries',
    {
      schema: {
        operationId: 'listDeliveries',
        summary: 'Pull deliveries (change feed)',
        description:
          'Rows in change order. To reconcile, pass the last updated_at you saw as ' +
          'updated_since and follow next_cursor until it is null; merge rows by delivery_id. ' +
          'Pending rows are included.',
        tags: ['deliveries'],
        querystring: DeliveryQuery,
        response: {
          200: success(
            DeliveryPage,
            'A page of rows in change order; follow next_cursor until it is null',
          ),
          ...errorResponses([400, ...V2_ERRORS], {
            400: 'A filter, the cursor or the limit is invalid',
          }),
        },
      },
    },
    async (req) => readFeed(rt.db, req.client.id, req.query),
  );
}
