import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { errorResponses, noContent, success, V2_ERRORS } from '../openapi/responses.ts';
import {
  checkOutboundUrl,
  Device,
  DeviceList,
  DevicePut,
  DeviceToken,
  Errors,
  MAX_DEVICES_PER_USER,
  TenantId,
  UserId,
  type DevicePut as DevicePutT,
  type Runtime,
} from '@ens/core';

const UserParams = Type.Object({ tenant: TenantId, user_id: UserId });
const DeviceParams = Type.Object({ tenant: TenantId, user_id: UserId, token: DeviceToken });
const TENANT_MISSING = 'No such tenant for this client (ENS_ERR_TENANT_NOT_FOUND)';
type UserParamsT = { tenant: string; user_id: string };
type DeviceParamsT = UserParamsT & { token: string };

/**
 * /v2/tenants/{tenant}/users/{user_id}/devices — the push device registry. Push recipients are
 * the caller's user ids; a push delivery goes to every device registered here for that user.
 */
export function deviceRoutes(app: FastifyInstance, rt: Runtime): void {
  app.put<{ Params: DeviceParamsT; Body: DevicePutT }>(
    '/v2/tenants/:tenant/users/:user_id/devices/:token',
    {
      schema: {
        operationId: 'putDevice',
        summary: "Register a user's push device",
        description:
          'Registers (201) or updates (200) a device. Without a body the token is an FCM ' +
          'registration token. ' +
          ("For web push, `token` is the caller's own id for the subscription and " +
            "`subscription` is the browser's PushSubscription JSON. ") +
          `A user may have up to ${MAX_DEVICES_PER_USER} devices (409 beyond). Tokens a provider reports dead are removed by ENS.`,
        tags: ['devices'],
        params: DeviceParams,
        body: DevicePut,
        response: {
          200: success(Device, 'The device was registered already: it is updated'),
          201: success(Device, 'The device was registered'),
          ...errorResponses([400, ...V2_ERRORS, 404, 409, 413, 415], {
            404: TENANT_MISSING,
            409: `The user has ${MAX_DEVICES_PER_USER} devices already (ENS_ERR_TOO_MANY_DEVICES)`,
          }),
        },
      },
      // A body-less PUT is the common case (an FCM token in the path); validate it as {}.
      preValidation: async (req) => {
        req.body ??= {};
      },
    },
    async (req, reply) => {
      const { tenant, user_id: userId, token } = req.params;
      const platform = req.body.platform ?? (req.body.subscription ? 'webpush' : 'fcm');
      const subscription = req.body.subscription ?? null;
      if (platform === 'webpush' && !subscription) {
        throw Errors.validation('Invalid body: /subscription is required for a webpush device', [
          { path: '/subscription', message: 'is required for a webpush device' },
        ]);
      }
      if (subscription) {
        // The endpoint is where ENS will POST: the outbound guard's rules hold from registration on
        // (form, scheme, loopback and private literals here; DNS and pinning again at every send).
        const checked = checkOutboundUrl(subscription.endpoint, {
          allowPrivate: rt.config.allowPrivateCallbacks,
        });
        if (!checked.ok) {
          throw Errors.validation(`Invalid body: /subscription/endpoint ${checked.detail}`, [
            { path: '/subscription/endpoint', message: checked.detail },
          ]);
        }
      }
      if (platform !== 'webpush' && subscription) {
        throw Errors.validation(
          `Invalid body: /subscription is only for webpush devices, not ${platform}`,
          [{ path: '/subscription', message: `is only for webpush devices, not ${platform}` }],
        );
      }
      if (platform === 'apns' && !/^[0-9a-fA-F]{64,200}$/.test(token)) {
        throw Errors.validation(
          'Invalid device token: an APNs device token is hexadecimal (64 digits or more)',
          [{ path: '/token', message: 'must be hexadecimal for apns' }],
        );
      }
      const r = await rt.devices.put(req.client.id, tenant, userId, token, platform, subscription);
      if ('refused' in r) {
        if (r.refused === 'tenant_missing') throw Errors.tenantNotFound(tenant);
        throw Errors.tooManyDevices(userId, MAX_DEVICES_PER_USER);
      }
      return reply.code(r.created ? 201 : 200).send(r.device);
    },
  );

  app.get<{ Params: UserParamsT }>(
    '/v2/tenants/:tenant/users/:user_id/devices',
    {
      schema: {
        operationId: 'listDevices',
        summary: "List a user's push devices",
        description:
          'An unknown user has no devices: 200 with an empty list. An unknown tenant is 404.',
        tags: ['devices'],
        params: UserParams,
        response: {
          200: success(DeviceList, "The user's devices"),
          ...errorResponses([400, ...V2_ERRORS, 404], { 404: TENANT_MISSING }),
        },
      },
    },
    async (req) => {
      const { tenant, user_id: userId } = req.params;
      const results = await rt.devices.list(req.client.id, tenant, userId);
      if (results.length === 0 && !(await rt.tenants.get(req.client.id, tenant)))
        throw Errors.tenantNotFound(tenant);
      return { results };
    },
  );

  app.delete<{ Params: DeviceParamsT }>(
    '/v2/tenants/:tenant/users/:user_id/devices/:token',
    {
      schema: {
        operationId: 'deleteDevice',
        summary: "Remove a user's push device",
        tags: ['devices'],
        params: DeviceParams,
        response: {
          204: noContent('The device was removed'),
          ...errorResponses([400, ...V2_ERRORS, 404], {
            404:
              'No such tenant (ENS_ERR_TENANT_NOT_FOUND), or the user has no device with this ' +
              'token (ENS_ERR_DEVICE_NOT_FOUND)',
          }),
        },
      },
    },
    async (req, reply) => {
      const { tenant, user_id: userId, token } = req.params;
      if (await rt.devices.remove(req.client.id, tenant, userId, token))
        return reply.code(204).send();
      if (!(await rt.tenants.get(req.client.id, tenant))) throw Errors.tenantNotFound(tenant);
      throw Errors.deviceNotFound(userId, tenant);
    },
  );
}
