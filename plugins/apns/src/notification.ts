import { createHash } from 'node:crypto';
import { deviceGoneError, permanentError, type OutboundMessage } from '@ens/plugin-sdk';
import type { ApnsConfig } from './config.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * apns-id for a delivery: the delivery id itself when it is a UUID (ENS's are), otherwise a
 * name-based UUID (version 8, SHA-256) of it. Every attempt of one delivery carries the same id,
 * so Apple's delivery log and ENS's provider_message_id line up across retries.
 */
export function apnsIdFor(deliveryId: string): string {
  if (UUID.test(deliveryId)) return deliveryId.toLowerCase();
  const b = createHash('sha256').update(`ens-apns:${deliveryId}`).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * Which bundle id a send goes to. A tenant's `push_app` may only name an app the operator listed
 * under `apps`: the signing key is team-wide and may reach every app of the team, so a tenant
 * setting must not be able to aim it at an arbitrary topic.
 */
export function topicFor(config: ApnsConfig, m: OutboundMessage): string {
  const app = m.tenantSettings.push_app;
  if (app === undefined || app === null || app === '') return config.topic;
  if (typeof app !== 'string')
    throw permanentError(`apns: tenant setting push_app must be a string, got ${typeof app}`);
  const entry = config.apps && Object.hasOwn(config.apps, app) ? config.apps[app] : undefined;
  if (!entry) {
    const known = Object.keys(config.apps ?? {});
    throw permanentError(
      `apns: tenant ${m.tenant} names push_app "${app}", which this provider does not configure (apps: ${known.length ? known.join(', ') : 'none'})`,
    );
  }
  return entry.topic;
}

/** APNs device tokens are hex of varying length; anything else can never reach a device. */
export function deviceTokenOf(m: OutboundMessage): string {
  const d = m.device;
  if (!d)
    throw permanentError(
      'apns: the send carries no device (the plugin declares pushPlatforms, so ENS must pass one)',
    );
  if (d.platform !== 'apns')
    throw permanentError(`apns: device platform is ${String(d.platform)}, not apns`);
  if (!/^[0-9A-Fa-f]{8,400}$/.test(d.token))
    throw deviceGoneError(
      'apns: the device token is not an APNs token (hexadecimal digits), so APNs would answer ' +
        'BadDeviceToken',
    );
  return d.token;
}

function stringField(content: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const v = content[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw permanentError(`apns: content.${key} must be a string`);
  return v;
}

/**
 * The JSON payload: `aps` for the system, then content.data's keys at the top level where the
 * app's notification handler reads them (Apple's custom-payload convention).
 */
export function payloadFor(config: ApnsConfig, m: OutboundMessage): Record<string, unknown> {
  const c = m.content;
  const custom: Record<string, string> = {};
  if (c.data !== undefined && c.data !== null) {
    if (typeof c.data !== 'object' || Array.isArray(c.data))
      throw permanentError('apns: content.data must be a map of string to string');
    for (const [k, v] of Object.entries(c.data as Record<string, unknown>)) {
      if (k === 'aps')
        throw permanentError(
          'apns: content.data may not use the key "aps": Apple reserves it for the system payload',
        );
      if (typeof v !== 'string') throw permanentError(`apns: content.data.${k} must be a string`);
      custom[k] = v;
    }
  }
  if ((config.pushType ?? 'alert') === 'background')
    return { aps: { 'content-available': 1 }, ...custom };

  const body = stringField(c, 'body');
  if (body === undefined || body === '')
    throw permanentError('apns: content.body is empty; an alert push needs text to show');
  const title = stringField(c, 'subject');
  const alert: Record<string, string> = title ? { title, body } : { body };
  const aps: Record<string, unknown> = { alert };
  if (config.sound) aps.sound = config.sound;
  return { aps, ...custom };
}

export interface ApnsRequest {
  apnsId: string;
  /** Everything but authorization, which the token cache adds per attempt. */
  headers: Record<string, string>;
  body: Buffer;
}

export function requestFor(config: ApnsConfig, m: OutboundMessage, nowMs: number): ApnsRequest {
  const token = deviceTokenOf(m);
  const topic = topicFor(config, m);
  const pushType = config.pushType ?? 'alert';
  const priority = config.priority ?? (pushType === 'background' ? 5 : 10);
  const ttl = config.expiration ?? 86_400;
  const apnsId = apnsIdFor(m.deliveryId);
  const body = Buffer.from(JSON.stringify(payloadFor(config, m)), 'utf8');
  return {
    apnsId,
    body,
    headers: {
      ':method': 'POST',
      ':path': `/3/device/${token}`,
      'apns-topic': topic,
      'apns-push-type': pushType,
      'apns-priority': String(priority),
      // 0 is Apple's "try once, do not store"; otherwise an absolute epoch, computed per attempt.
      'apns-expiration': String(ttl === 0 ? 0 : Math.floor(nowMs / 1000) + ttl),
      'apns-id': apnsId,
      'content-length': String(body.length),
    },
  };
}
