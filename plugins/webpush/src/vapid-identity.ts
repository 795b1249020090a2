import { createECDH } from 'node:crypto';
import webpush from 'web-push';
import { permanentError, type TenantSettings } from '@ens/plugin-sdk';
import type { Identity, WebPushConfig } from './config-schema.ts';

export interface NamedIdentity extends Identity {
  /** 'default' for the top-level keys, else the app's name. */
  name: string;
}

/**
 * The VAPID identity a tenant sends with: the app its push_app setting names, else the top-level
 * keys. With no apps configured every tenant uses the top-level keys, whatever its push_app (the
 * setting is shared with the FCM and APNs plugins, and this deployment has one key anyway). With
 * apps configured, a push_app naming none of them is refused rather than falling back: a
 * subscription only accepts the key it was made with (RFC 8292 §4.2), so the default key would be
 * refused for every subscription of that tenant.
 */
export function identityFor(
  config: WebPushConfig,
  settings: Readonly<TenantSettings>,
): NamedIdentity {
  const app = settings.push_app;
  const apps = config.apps ?? {};
  if (app === undefined || app === null || app === '' || Object.keys(apps).length === 0)
    return { name: 'default', ...pick(config) };
  const found = typeof app === 'string' && Object.hasOwn(apps, app) ? apps[app] : undefined;
  if (!found) {
    throw permanentError(
      `webpush: tenant setting push_app "${String(app)}" names no configured VAPID app (configured: ${Object.keys(apps).join(', ')})`,
    );
  }
  return { name: app as string, ...pick(found) };
}

function pick(i: Identity): Identity {
  return {
    vapidSubject: i.vapidSubject,
    vapidPublicKey: i.vapidPublicKey,
    vapidPrivateKey: i.vapidPrivateKey,
  };
}

export function allIdentities(config: WebPushConfig): NamedIdentity[] {
  return [
    { name: 'default', ...pick(config) },
    ...Object.entries(config.apps ?? {}).map(([name, i]) => ({ name, ...pick(i) })),
  ];
}

/**
 * Why an identity cannot sign, or null when it can: web-push's own validation of subject and
 * keys, then whether the private key is the one the public key belongs to. A pair mixed up from
 * two generations signs tokens every push service refuses, and no answer says why.
 */
export function identityProblem(i: Identity): string | null {
  try {
    // web-push validates subject and both keys before it signs; the audience is a placeholder.
    webpush.getVapidHeaders(
      'https://push.example',
      i.vapidSubject,
      i.vapidPublicKey,
      i.vapidPrivateKey,
      'aes128gcm',
    );
  } catch (e) {
    return (e as Error).message;
  }
  const ecdh = createECDH('prime256v1');
  try {
    ecdh.setPrivateKey(Buffer.from(i.vapidPrivateKey, 'base64url'));
  } catch (e) {
    return `the private key is not a P-256 key: ${(e as Error).message}`;
  }
  if (!ecdh.getPublicKey().equals(Buffer.from(i.vapidPublicKey, 'base64url'))) {
    return 'vapidPublicKey is not the public half of vapidPrivateKey';
  }
  return null;
}
