import webpush from 'web-push';
import { permanentError, type OutboundGuard, type WebPushSubscription } from '@ens/plugin-sdk';
import { classifyNetworkFailure } from './error-classes.ts';
import type { NamedIdentity } from './vapid-identity.ts';

export interface PushOptions {
  ttlSeconds: number;
  urgency: 'very-low' | 'low' | 'normal' | 'high';
  contentEncoding: 'aes128gcm';
  timeoutMs: number;
}

export interface PushAnswer {
  status: number;
  headers: Headers;
  body: string;
  /** Size of the encrypted body sent. */
  octets: number;
}

/**
 * Encrypts the payload (RFC 8291) and signs the VAPID token (RFC 8292) with web-push's
 * generateRequestDetails, then POSTs the request with fetch. web-push's own sendNotification is not
 * used: it always speaks TLS (`https.request`, whatever the endpoint's scheme) and its `timeout` is
 * a socket-idle timeout, not a deadline for the answer; fetch gives both plain http (a local push
 * service) and a real deadline, and the bytes on the wire are web-push's either way.
 */
/**
 * The endpoint is the client's choice (it came with the device registration), so the request goes
 * through ENS's outbound guard: no private or loopback address, the checked address pinned, no
 * redirect followed.
 */
export async function postPush(
  subscription: WebPushSubscription,
  payload: string,
  identity: NamedIdentity,
  o: PushOptions,
  outbound: OutboundGuard,
): Promise<PushAnswer> {
  let details: ReturnType<typeof webpush.generateRequestDetails>;
  try {
    details = webpush.generateRequestDetails(
      {
        endpoint: subscription.endpoint,
        keys: { p256dh: subscription.keys.p256dh, auth: subscription.keys.auth },
      },
      payload,
      {
        vapidDetails: {
          subject: identity.vapidSubject,
          publicKey: identity.vapidPublicKey,
          privateKey: identity.vapidPrivateKey,
        },
        TTL: o.ttlSeconds,
        urgency: o.urgency,
        contentEncoding: o.contentEncoding,
      },
    );
  } catch (e) {
    // web-push refuses malformed subscription keys here; the same subscription will never work.
    throw permanentError(
      `webpush: cannot encrypt to this subscription: ${(e as Error).message}`,
      e,
    );
  }
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(details.headers)) {
    // fetch computes Content-Length from the body itself.
    if (k.toLowerCase() !== 'content-length') headers[k] = String(v);
  }
  const body = details.body ?? Buffer.alloc(0);
  const origin = new URL(details.endpoint).origin;
  let res: Response;
  try {
    res = await outbound.fetch(details.endpoint, {
      method: 'POST',
      headers,
      body,
      signal: AbortSignal.timeout(o.timeoutMs),
    });
  } catch (e) {
    throw classifyNetworkFailure(e, origin, o.timeoutMs);
  }
  let text: string;
  try {
    text = await res.text();
  } catch (e) {
    throw classifyNetworkFailure(e, origin, o.timeoutMs);
  }
  return { status: res.status, headers: res.headers, body: text, octets: body.length };
}
