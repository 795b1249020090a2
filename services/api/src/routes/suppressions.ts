import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { errorResponses, noContent, success, V2_ERRORS } from '../openapi/responses.ts';
import {
  Errors,
  addressWording,
  normaliseAddress,
  Suppression,
  SuppressionAddressParams,
  SuppressionDeleteQuery,
  SuppressionEntries,
  SuppressionPage,
  SuppressionPut,
  SuppressionQuery,
  TenantId,
  type Channel,
  type Runtime,
  type SuppressionAddressParams as AddressParamsT,
  type SuppressionDeleteQuery as DeleteQueryT,
  type SuppressionPut as SuppressionPutT,
  type SuppressionQuery as SuppressionQueryT,
} from '@ens/core';

const TenantParams = Type.Object({ tenant: TenantId });
const TENANT_MISSING = 'No such tenant for this client (ENS_ERR_TENANT_NOT_FOUND)';
const ENTRY_MISSING =
  'No such tenant for this client (ENS_ERR_TENANT_NOT_FOUND), or the address has no entry ' +
  '(ENS_ERR_SUPPRESSION_NOT_FOUND)';

/** The address as the list keys it, or the 400 that says what the channel's addresses look like. */
function addressKey(channel: Channel, raw: string): string {
  const key = normaliseAddress(channel, raw);
  if (key === null) {
    throw Errors.validation(
      `Invalid address: "${raw.slice(0, 100)}" is not a ${channel} address; give ${addressWording(channel, { inPath: true })}`,
      [{ path: '/address', message: `is not a ${channel} address` }],
    );
  }
  return key;
}

async function requireTenant(rt: Runtime, clientId: string, tenant: string): Promise<void> {
  if (!(await rt.tenants.get(clientId, tenant))) throw Errors.tenantNotFound(tenant);
}

/** Every entry of one address (one per scope), walking the primary key page by page. */
async function entriesOf(
  rt: Runtime,
  clientId: string,
  tenant: string,
  channel: Channel,
  key: string,
): Promise<Suppression[]> {
  const out: Suppression[] = [];
  let cursor: string | undefined;
  do {
    const page = await rt.suppressions.list(clientId, tenant, {
      channel,
      address: key,
      limit: 1000,
      ...(cursor !== undefined ? { cursor } : {}),
    });
    out.push(...page.results);
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
  return out;
}

/**
 * /v2/tenants/{tenant}/suppressions — a tenant's suppression list, read and edited by its client.
 * Entries made here have source `api` and the client's id as created_by. Every statement is by key
 * or walks the primary key (client, tenant, channel, address, scope), so a list of millions costs
 * no more per page than one of ten.
 */
export function suppressionRoutes(app: FastifyInstance, rt: Runtime): void {
  app.get<{ Params: { tenant: string }; Querystring: SuppressionQueryT }>(
    '/v2/tenants/:tenant/suppressions',
    {
      schema: {
        operationId: 'listSuppressions',
        summary: "List a tenant's suppression list",
        description:
          'Ordered by channel, address and scope; pass next_cursor as cursor for the next page ' +
          '(null on the last). ' +
          ('Filter by reason, channel, and address (with channel: it is normalised as that ' +
            "channel's addresses are)."),
        tags: ['suppressions'],
        params: TenantParams,
        querystring: SuppressionQuery,
        response: {
          200: success(SuppressionPage, 'A page of entries'),
          ...errorResponses([400, ...V2_ERRORS, 404], {
            400: 'A filter, limit or cursor is invalid, or address is given without channel',
            404: TENANT_MISSING,
          }),
        },
      },
    },
    async (req) => {
      const { tenant } = req.params;
      const q = req.query;
      if (q.address !== undefined) {
        if (q.channel === undefined)
          throw Errors.validation(
            "Invalid query: /address needs /channel (an address is normalised as its channel's " +
              'addresses are)',
            [{ path: '/channel', message: 'is required with address' }],
          );
        addressKey(q.channel, q.address);
      }
      await requireTenant(rt, req.client.id, tenant);
      return rt.suppressions.list(req.client.id, tenant, q);
    },
  );

  app.get<{ Params: AddressParamsT }>(
    '/v2/tenants/:tenant/suppressions/:channel/:address',
    {
      schema: {
        operationId: 'getSuppression',
        summary: "An address's entries",
        description:
          'Every entry of the address, one per scope (`*`, or an event type an unsubscribe named).',
        tags: ['suppressions'],
        params: SuppressionAddressParams,
        response: {
          200: success(SuppressionEntries, "The address's entries"),
          ...errorResponses([400, ...V2_ERRORS, 404], {
            400: 'The channel is unknown or the address is not one of its addresses',
            404: ENTRY_MISSING,
          }),
        },
      },
    },
    async (req) => {
      const { tenant, channel, address } = req.params;
      const key = addressKey(channel, address);
      await requireTenant(rt, req.client.id, tenant);
      const results = await entriesOf(rt, req.client.id, tenant, channel, key);
      if (results.length === 0) throw Errors.suppressionNotFound(channel, key, tenant);
      return { results };
    },
  );

  app.put<{ Params: AddressParamsT; Body: SuppressionPutT }>(
    '/v2/tenants/:tenant/suppressions/:channel/:address',
    {
      schema: {
        operationId: 'putSuppression',
        summary: 'Suppress an address',
        description:
          'Adds (201) or replaces (200) the entry of the address in `scope` (`*`: every event ' +
          'type, the default). `reason` defaults to `manual`. ' +
          ('Sends to the address in that scope fail `suppressed: …` without a provider call ' +
            'from the moment this answers, including those accepted before. ') +
          'A soft_bounce does not replace a standing entry of another reason (409).',
        tags: ['suppressions'],
        params: SuppressionAddressParams,
        body: SuppressionPut,
        response: {
          200: success(Suppression, 'The entry existed: it is replaced'),
          201: success(Suppression, 'The entry was added'),
          ...errorResponses([400, ...V2_ERRORS, 404, 409, 413, 415], {
            400:
              "The address is not one of the channel's, or the body is invalid (unknown field, " +
              'bad scope, expires_at not in the future)',
            404: TENANT_MISSING,
            409: 'A soft_bounce over a standing entry of another reason (ENS_ERR_SUPPRESSION_KEPT)',
          }),
        },
      },
      // A body-less PUT suppresses for every event type, as `manual`.
      preValidation: async (req) => {
        req.body ??= {};
      },
    },
    async (req, reply) => {
      const { tenant, channel, address } = req.params;
      const body = req.body;
      const key = addressKey(channel, address);
      if (body.expires_at !== undefined && Date.parse(body.expires_at) <= Date.now()) {
        throw Errors.validation(
          'Invalid body: /expires_at is not in the future (an entry that has lapsed stops nothing)',
          [{ path: '/expires_at', message: 'is not in the future' }],
        );
      }
      await requireTenant(rt, req.client.id, tenant);
      const scope = body.scope ?? '*';
      const { entries, created } = await rt.suppressions.upsert(req.client.id, [
        {
          tenant,
          channel,
          address: key,
          scope,
          reason: body.reason ?? 'manual',
          source: 'api',
          createdBy: req.client.id,
          detail: body.detail ?? null,
          expiresAt: body.expires_at ?? null,
        },
      ]);
      const entry = entries[0];
      if (!entry) {
        const standing = (await entriesOf(rt, req.client.id, tenant, channel, key)).find(
          (e) => e.scope === scope,
        );
        throw Errors.suppressionKept(key, standing?.reason ?? 'other', scope);
      }
      return reply.code(created > 0 ? 201 : 200).send(entry);
    },
  );

  app.delete<{ Params: AddressParamsT; Querystring: DeleteQueryT }>(
    '/v2/tenants/:tenant/suppressions/:channel/:address',
    {
      schema: {
        operationId: 'deleteSuppression',
        summary: 'Lift the suppression of an address',
        description:
          'Removes the entry of `scope`, or every entry of the address without it. Sends to it ' +
          'go through again from the moment this answers.',
        tags: ['suppressions'],
        params: SuppressionAddressParams,
        querystring: SuppressionDeleteQuery,
        response: {
          204: noContent('The entries were removed'),
          ...errorResponses([400, ...V2_ERRORS, 404], {
            400: "The address is not one of the channel's, or scope is invalid",
            404: ENTRY_MISSING,
          }),
        },
      },
    },
    async (req, reply) => {
      const { tenant, channel, address } = req.params;
      const key = addressKey(channel, address);
      await requireTenant(rt, req.client.id, tenant);
      const removed = await rt.suppressions.remove(
        req.client.id,
        tenant,
        channel,
        key,
        req.query.scope,
      );
      if (removed.length === 0)
        throw Errors.suppressionNotFound(channel, key, tenant, req.query.scope);
      return reply.code(204).send();
    },
  );
}
