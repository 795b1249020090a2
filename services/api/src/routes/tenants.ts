import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { errorResponses, noContent, success, V2_ERRORS } from '../openapi/responses.ts';
import {
  Errors,
  Tenant,
  TenantCreate,
  TenantId,
  TenantPatch,
  type Runtime,
  type TenantCreate as TenantCreateT,
  type TenantPatch as TenantPatchT,
} from '@ens/core';

const Params = Type.Object({ tenant: TenantId });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    after: Type.Optional(Type.String({ description: 'The last tenant id of the previous page' })),
  },
  { additionalProperties: false },
);
const TenantList = Type.Object({
  results: Type.Array(Tenant),
  next_after: Type.Union([Type.String(), Type.Null()]),
});

const TENANT_WORDING = { 404: 'No such tenant for this client (ENS_ERR_TENANT_NOT_FOUND)' };

/** Tenant settings are read at every send: bounded so that no tenant's row grows without limit. */
const MAX_SETTINGS_BYTES = 16 * 1024;

function checkSettingsSize(settings: unknown): void {
  if (settings === undefined) return;
  const bytes = Buffer.byteLength(JSON.stringify(settings));
  if (bytes > MAX_SETTINGS_BYTES) {
    throw Errors.validation(
      `Invalid body: /settings is ${bytes} bytes as JSON; at most ${MAX_SETTINGS_BYTES}`,
      [{ path: '/settings', message: `is ${bytes} bytes as JSON; at most ${MAX_SETTINGS_BYTES}` }],
    );
  }
}

/** /v2/tenants — tenants belong to the client that created them; no other client can see them. */
export function tenantRoutes(app: FastifyInstance, rt: Runtime): void {
  app.post<{ Body: TenantCreateT }>(
    '/v2/tenants',
    {
      schema: {
        operationId: 'createTenant',
        summary: 'Provision a tenant',
        description:
          '201 with the tenant when created; 200 with the existing tenant when it was already ' +
          'provisioned.',
        tags: ['tenants'],
        body: TenantCreate,
        response: {
          200: success(Tenant, 'The tenant was already provisioned: it is returned unchanged'),
          201: success(Tenant, 'The tenant was created'),
          ...errorResponses([400, ...V2_ERRORS, 413, 415]),
        },
      },
    },
    async (req, reply) => {
      checkSettingsSize(req.body.settings);
      const { created, tenant } = await rt.tenants.create(req.client.id, req.body);
      return reply.code(created ? 201 : 200).send(tenant);
    },
  );
  app.get<{ Querystring: { limit?: number; after?: string } }>(
    '/v2/tenants',
    {
      schema: {
        operationId: 'listTenants',
        summary: 'List tenants',
        description: 'Ordered by id; pass next_after as after for the next page.',
        tags: ['tenants'],
        querystring: ListQuery,
        response: {
          200: success(TenantList, "A page of the client's tenants"),
          ...errorResponses([400, ...V2_ERRORS], { 400: 'limit or after is invalid' }),
        },
      },
    },
    async (req) => {
      const limit = req.query.limit ?? 100;
      const results = await rt.tenants.list(req.client.id, { after: req.query.after, limit });
      return {
        results,
        next_after: results.length === limit ? results[results.length - 1]!.tenant : null,
      };
    },
  );
  app.get<{ Params: { tenant: string } }>(
    '/v2/tenants/:tenant',
    {
      schema: {
        operationId: 'getTenant',
        summary: 'Get a tenant',
        tags: ['tenants'],
        params: Params,
        response: {
          200: success(Tenant, 'The tenant'),
          ...errorResponses([400, ...V2_ERRORS, 404], TENANT_WORDING),
        },
      },
    },
    async (req) => {
      const t = await rt.tenants.get(req.client.id, req.params.tenant);
      if (!t) throw Errors.tenantNotFound(req.params.tenant);
      return t;
    },
  );
  app.patch<{ Params: { tenant: string }; Body: TenantPatchT }>(
    '/v2/tenants/:tenant',
    {
      schema: {
        operationId: 'updateTenant',
        summary: 'Update a tenant',
        description: '`settings` is replaced as a whole; `"name": null` clears the name.',
        tags: ['tenants'],
        params: Params,
        body: TenantPatch,
        response: {
          200: success(Tenant, 'The tenant as updated'),
          ...errorResponses([400, ...V2_ERRORS, 404, 413, 415], TENANT_WORDING),
        },
      },
    },
    async (req) => {
      checkSettingsSize(req.body.settings);
      const t = await rt.tenants.update(req.client.id, req.params.tenant, req.body);
      if (!t) throw Errors.tenantNotFound(req.params.tenant);
      return t;
    },
  );
  app.delete<{ Params: { tenant: string } }>(
    '/v2/tenants/:tenant',
    {
      schema: {
        operationId: 'deleteTenant',
        summary: 'Delete a tenant',
        description:
          'Only a tenant without messages can be deleted (409 otherwise): its deliveries stay ' +
          'in the record.',
        tags: ['tenants'],
        params: Params,
        response: {
          204: noContent('The tenant was deleted'),
          ...errorResponses([400, ...V2_ERRORS, 404, 409], {
            ...TENANT_WORDING,
            409: 'The tenant has messages (ENS_ERR_TENANT_IN_USE)',
          }),
        },
      },
    },
    async (req, reply) => {
      const r = await rt.tenants.delete(req.client.id, req.params.tenant);
      if (r === 'missing') throw Errors.tenantNotFound(req.params.tenant);
      if (r === 'in_use') throw Errors.tenantInUse(req.params.tenant);
      return reply.code(204).send();
    },
  );
}
